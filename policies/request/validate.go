package request

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/durable-llm/durable-llm/policies/config"
)

// DefaultMaxPromptBytes is the prompt size limit when the policy sets none
// (limits.max_prompt_bytes): 1 MiB, half of Temporal's 2 MB payload limit.
const DefaultMaxPromptBytes = 1 << 20

// PromptBytes is the size of a prompt as every prompt limit counts it (the
// worker's Validate, the front door's 413, llmclient's check before
// starting): the bytes of each message's role, content (text parts and
// image URLs included), name and
// tool_call_id and of each tool call's id, type, function name and
// arguments. JSON framing adds little.
func PromptBytes(msgs []Message) int {
	n := 0
	for _, m := range msgs {
		n += len(m.Role) + len(m.Content) + len(m.Name) + len(m.ToolCallID)
		for _, p := range m.Parts {
			n += len(p.Text)
			if p.ImageURL != nil {
				n += len(p.ImageURL.URL)
			}
		}
		for _, tc := range m.ToolCalls {
			n += len(tc.ID) + len(tc.Type) + len(tc.Function.Name) + len(tc.Function.Arguments)
		}
	}
	return n
}

// MaxPromptBytes is the prompt size limit of l: l.MaxPromptBytes, or
// DefaultMaxPromptBytes when it is zero.
func MaxPromptBytes(l config.LimitsConfig) int {
	if l.MaxPromptBytes > 0 {
		return l.MaxPromptBytes
	}
	return DefaultMaxPromptBytes
}

// The request limits Validate applies when the Config leaves them
// zero (docs/how-it-works.md, step 1); they mirror the defaults of the policy file.
const (
	reqDefaultMaxMessages    = 1000
	reqDefaultMaxTokens      = 32768
	reqDefaultMaxTemperature = 2.0
	reqDefaultMaxDeadline    = 10 * time.Minute
)

// MinRequestDeadline is the shortest deadline a request may ask for: below
// it neither an attempt nor the fallback can finish.
const MinRequestDeadline = time.Second

// maxReportedProblems bounds ValidationError.Problems so that a request with
// a million bad messages does not produce a million-line error.
const maxReportedProblems = 50

// FieldProblem is one thing wrong with a request: the JSON path of the field
// (messages[2].role) and what is wrong with it.
type FieldProblem struct {
	Field   string `json:"field"`
	Problem string `json:"problem"`
}

// String returns "field: problem".
func (p FieldProblem) String() string { return p.Field + ": " + p.Problem }

// ValidationError is returned by Validate: every problem found in a
// request, in the order of the request's fields. Callers map it to a
// non-retryable invalid_request failure (an HTTP 400 at the front door).
type ValidationError struct {
	Problems []FieldProblem
	// Omitted counts problems found beyond the ones listed.
	Omitted int
}

// Error returns one line: "invalid request: " and every "field: problem",
// separated by "; " (the first ten, then how many more).
func (e *ValidationError) Error() string {
	const shown = 10
	var b strings.Builder
	b.WriteString("invalid request: ")
	for i, p := range e.Problems {
		if i == shown {
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p.String())
	}
	if more := max(0, len(e.Problems)-shown) + e.Omitted; more > 0 {
		fmt.Fprintf(&b, "; and %d more problem(s)", more)
	}
	return b.String()
}

// Fields returns the fields with a problem, in order, each once.
func (e *ValidationError) Fields() []string {
	var out []string
	for _, p := range e.Problems {
		if !slices.Contains(out, p.Field) {
			out = append(out, p.Field)
		}
	}
	return out
}

// add records a problem, keeping at most maxReportedProblems.
func (e *ValidationError) add(field, format string, args ...any) {
	if len(e.Problems) >= maxReportedProblems {
		e.Omitted++
		return
	}
	e.Problems = append(e.Problems, FieldProblem{Field: field, Problem: fmt.Sprintf(format, args...)})
}

// reqLimits are the limits Validate applies, zero config values
// replaced by the defaults.
type reqLimits struct {
	maxPromptBytes int
	// window and windowModel: the ladder's largest context window and
	// its model, when it ties maxPromptBytes (PromptBytesPerContextToken).
	window         int
	windowModel    string
	maxMessages    int
	maxTokens      int
	maxTemperature float64
	maxDeadline    time.Duration
	maxImages      int
	maxImageBytes  int
	models         []string
}

// reqLimitsOf resolves the limits of cfg (nil: all defaults, any model).
func reqLimitsOf(cfg *config.Config) reqLimits {
	l := reqLimits{
		maxPromptBytes: DefaultMaxPromptBytes,
		maxMessages:    reqDefaultMaxMessages,
		maxTokens:      reqDefaultMaxTokens,
		maxTemperature: reqDefaultMaxTemperature,
		maxDeadline:    reqDefaultMaxDeadline,
		maxImages:      DefaultMaxImages,
		maxImageBytes:  DefaultMaxImageBytes,
	}
	if cfg == nil {
		return l
	}
	l.maxPromptBytes = MaxPromptBytes(cfg.Limits)
	if v := cfg.Limits.MaxMessages; v > 0 {
		l.maxMessages = v
	}
	if v := cfg.Limits.MaxTokens; v > 0 {
		l.maxTokens = v
	}
	if v := cfg.Limits.MaxTemperature; v > 0 {
		l.maxTemperature = v
	}
	if v := cfg.Limits.MaxImages; v > 0 {
		l.maxImages = v
	}
	if v := cfg.Limits.MaxImageBytes; v > 0 {
		l.maxImageBytes = v
	}
	if v := cfg.Call.MaxDeadline.D(); v > 0 {
		l.maxDeadline = v
	}
	for _, m := range cfg.Models {
		l.models = append(l.models, m.Name)
		if m.ContextWindow > l.window {
			l.window, l.windowModel = m.ContextWindow, m.Name
		}
	}
	if l.window > 0 && l.window*PromptBytesPerContextToken >= l.maxPromptBytes {
		l.window = 0 // the policy's byte limit is the tighter one
	}
	return l
}

// PromptBytesPerContextToken ties the prompt size limit to the ladder's
// largest context window: a prompt may be at most this many bytes per
// token of that window (and at most limits.max_prompt_bytes). A token is
// about 4 bytes of English and 2–3 of Chinese, so the limit leaves room
// for a conversation several windows long, which pruning cuts to fit;
// beyond it most of the prompt would be cut anyway, while every attempt
// would record all of it in the call's history again.
const PromptBytesPerContextToken = 16

// Validate checks r before anything is sent (docs/how-it-works.md, step 1) and returns nil
// or a *ValidationError listing every problem as "field: problem": the
// messages, the prompt's size, model, max_tokens, temperature,
// deadline_ms, the agent fields (docs/agents.md), scenario, image URLs,
// idempotency_key, and that every string is valid UTF-8. "Validation" in
// the package documentation lists what each must be. A nil cfg, and zero
// limits in cfg, mean the policy file's default limits, which this package
// mirrors.
func Validate(r Request, cfg *config.Config) error {
	lim := reqLimitsOf(cfg)
	e := &ValidationError{}

	for _, f := range []struct{ field, value string }{
		{"tenant", r.Tenant}, {"user_id", r.UserID}, {"session_id", r.SessionID},
		{"scenario", r.Scenario}, {"model", r.Model},
	} {
		reqCheckUTF8(e, f.field, f.value)
		// These end up in search attributes and workflow IDs, which have
		// small size limits.
		if len(f.value) > MaxLabelBytes {
			e.add(f.field, "%d bytes, over the limit of %d", len(f.value), MaxLabelBytes)
		}
	}

	if cfg != nil && len(r.Scenario) <= MaxLabelBytes && utf8.ValidString(r.Scenario) && !cfg.KnownScenario(r.Scenario) {
		e.add("scenario", "unknown scenario %q (known: %s; the policy's request.scenarios, rules and hedge.scenarios name them)",
			r.Scenario, joinSome(cfg.KnownScenarios(), 20))
	}

	validateMessages(e, r.Messages, lim)
	if size := encodedSize(r); size > MaxEncodedRequestBytes {
		e.add("messages", "the request is %s once JSON-encoded (characters like < > & take 6 bytes each), over the %s a Temporal payload may carry",
			reqByteSize(size), reqByteSize(MaxEncodedRequestBytes))
	}

	if r.Model != "" && len(lim.models) > 0 && !slices.Contains(lim.models, r.Model) {
		hint := ""
		for _, m := range lim.models {
			if strings.EqualFold(m, r.Model) {
				hint = fmt.Sprintf("; did you mean %q?", m)
				break
			}
		}
		e.add("model", "unknown model %q (want empty for the first model, or one of %s)%s",
			r.Model, strings.Join(lim.models, ", "), hint)
	}

	switch {
	case r.MaxTokens < 0:
		e.add("max_tokens", "%d is negative (want 0 for the model's default, or 1..%d)", r.MaxTokens, lim.maxTokens)
	case r.MaxTokens > lim.maxTokens:
		e.add("max_tokens", "%d is over the limit of %d", r.MaxTokens, lim.maxTokens)
	}

	if t := r.Temperature; t != nil {
		switch {
		case math.IsNaN(*t) || math.IsInf(*t, 0):
			e.add("temperature", "%v is not a number (want 0..%g)", *t, lim.maxTemperature)
		case *t < 0:
			e.add("temperature", "%g is negative (want 0..%g)", *t, lim.maxTemperature)
		case *t > lim.maxTemperature:
			e.add("temperature", "%g is over the limit of %g", *t, lim.maxTemperature)
		}
	}

	if d := r.DeadlineMS; d != 0 {
		// Compared in milliseconds: as a time.Duration (nanoseconds) a
		// deadline above 292 years overflows and reads as negative.
		switch {
		case d < 0:
			e.add("deadline_ms", "%d is negative (want 0 for the default, or %d..%d)",
				d, MinRequestDeadline.Milliseconds(), lim.maxDeadline.Milliseconds())
		case d < MinRequestDeadline.Milliseconds():
			e.add("deadline_ms", "%d ms is below the minimum of %d ms (%v)", d, MinRequestDeadline.Milliseconds(), MinRequestDeadline)
		case d > lim.maxDeadline.Milliseconds():
			e.add("deadline_ms", "%d ms is over the limit of %d ms (%v)", d, lim.maxDeadline.Milliseconds(), lim.maxDeadline)
		}
	}

	validateAgent(e, r, cfg, lim)
	var allowHosts []string
	if cfg != nil {
		allowHosts = cfg.Request.AllowImageHosts
	}
	validateImageHosts(e, r.Messages, allowHosts)

	if r.IdempotencyKey != "" {
		if p := keyProblem(r.IdempotencyKey); p != "" {
			e.add("idempotency_key", "%s", p)
		}
	}

	if len(e.Problems) == 0 && e.Omitted == 0 {
		return nil
	}
	return e
}

// validateMessages checks the messages and the prompt size.
func validateMessages(e *ValidationError, msgs []Message, lim reqLimits) {
	if len(msgs) == 0 {
		e.add("messages", "empty (want at least one message, the last from the user)")
		return
	}
	if len(msgs) > lim.maxMessages {
		e.add("messages", "%d messages, over the limit of %d", len(msgs), lim.maxMessages)
	}

	toolCallIDs := map[string]bool{}
	for i, m := range msgs {
		at := fmt.Sprintf("messages[%d]", i)

		switch m.Role {
		case RoleSystem, RoleDeveloper, RoleUser, RoleAssistant, RoleTool:
		case "":
			e.add(at+".role", "missing (want system, developer, user, assistant or tool)")
		default:
			e.add(at+".role", "unknown role %q (want system, developer, user, assistant or tool)", m.Role)
		}
		reqCheckUTF8(e, at+".content", m.Content)
		reqCheckUTF8(e, at+".name", m.Name)
		reqCheckUTF8(e, at+".tool_call_id", m.ToolCallID)

		if len(m.ToolCalls) > 0 && m.Role != RoleAssistant {
			e.add(at+".tool_calls", "on a %q message (only assistant messages call tools)", m.Role)
		}
		for j, tc := range m.ToolCalls {
			tat := fmt.Sprintf("%s.tool_calls[%d]", at, j)
			if tc.ID == "" {
				e.add(tat+".id", "missing (a tool message answers it by this id)")
			} else {
				toolCallIDs[tc.ID] = true
			}
			if tc.Function.Name == "" {
				e.add(tat+".function.name", "missing")
			}
			reqCheckUTF8(e, tat+".id", tc.ID)
			reqCheckUTF8(e, tat+".function.name", tc.Function.Name)
			reqCheckUTF8(e, tat+".function.arguments", tc.Function.Arguments)
		}

		if m.Role == RoleTool {
			switch {
			case m.ToolCallID == "":
				e.add(at+".tool_call_id", "missing on a tool message (want the id of the tool call it answers)")
			case !toolCallIDs[m.ToolCallID]:
				e.add(at+".tool_call_id", "%q answers no tool call of an earlier assistant message", m.ToolCallID)
			}
		}
	}

	last := len(msgs) - 1
	switch lm := msgs[last]; {
	case lm.Role == RoleTool:
		// An agent's turn: the results of the tool calls the model asked
		// for; the model answers them.
	case lm.Role != RoleUser:
		e.add(fmt.Sprintf("messages[%d].role", last), "the last message is from %q (want user, the question, or tool, the results of the model's tool calls)", lm.Role)
	case strings.TrimSpace(lm.Text()) == "" && lm.Images() == 0:
		e.add(fmt.Sprintf("messages[%d].content", last), "empty (the last user message is the question)")
	}

	size := PromptBytes(msgs)
	switch {
	case lim.window > 0 && size > lim.window*PromptBytesPerContextToken:
		e.add("messages", "prompt is %s, over the limit of %s (%d bytes a token of the largest context window, %s's %d tokens: several windows' worth, more than pruning may cut a prompt to)",
			reqByteSize(size), reqByteSize(lim.window*PromptBytesPerContextToken), PromptBytesPerContextToken, lim.windowModel, lim.window)
	case size > lim.maxPromptBytes:
		e.add("messages", "prompt is %s, over the limit of %s", reqByteSize(size), reqByteSize(lim.maxPromptBytes))
	}
}

// reqCheckUTF8 records a problem when s is not valid UTF-8, naming the offset
// of the first bad byte.
func reqCheckUTF8(e *ValidationError, field, s string) {
	if utf8.ValidString(s) {
		return
	}
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			e.add(field, "invalid UTF-8 at byte %d", i)
			return
		}
		i += n
	}
}

// joinSome joins the first n of names with ", " and says how many more
// there are.
func joinSome(names []string, n int) string {
	if len(names) == 0 {
		return "none"
	}
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}

// reqByteSize formats n as "1.5 MiB (1572864 bytes)".
func reqByteSize(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%s MiB (%d bytes)", reqTrimFloat(float64(n)/(1<<20)), n)
	case n >= 1<<10:
		return fmt.Sprintf("%s KiB (%d bytes)", reqTrimFloat(float64(n)/(1<<10)), n)
	}
	return fmt.Sprintf("%d bytes", n)
}

// reqTrimFloat formats f with at most two decimals and no trailing zeros.
func reqTrimFloat(f float64) string {
	s := fmt.Sprintf("%.2f", f)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// MaxLabelBytes bounds the short text fields of a request (tenant, user and
// session IDs, scenario, model): they reach search attributes and keys.
const MaxLabelBytes = 256

// MaxEncodedRequestBytes bounds a request as JSON, the way it travels as a
// Temporal payload (2 MB at most), with room for the rest of the payload.
const MaxEncodedRequestBytes = 1_900_000

// encodedSize is the size of r encoded as Temporal's JSON converter does.
func encodedSize(r Request) int {
	b, err := json.Marshal(r)
	if err != nil {
		return 0 // not encodable: the field checks name the problem
	}
	return len(b)
}
