package request

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/structured"
)

// The limits of the agent fields, as OpenAI's API sets them.
const (
	maxTools       = 128
	maxStop        = 4
	maxTopLogprobs = 20
	// DefaultMaxImages and DefaultMaxImageBytes apply when the policy's
	// limits leave them zero.
	DefaultMaxImages     = 8
	DefaultMaxImageBytes = 256 << 10
)

// validated keeps the schemas Validate compiled: a request is validated
// at the front door and again when its call is admitted, and every attempt
// checks its answer against the same schema (CheckAnswer with this cache).
var validated = structured.NewCache()

// Schemas is the cache of the schemas Validate compiled, for CheckAnswer.
func Schemas() *structured.Cache { return validated }

var (
	nameRE          = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	reasoningEffort = []string{"none", "minimal", "low", "medium", "high", "xhigh"}
	imageDetail     = []string{"", "auto", "low", "high"}
	imageTypes      = []string{"image/png", "image/jpeg", "image/gif", "image/webp"}
)

// Needs lists the capabilities a model must have to serve r: tools when
// it offers tools (and tool_choice is not none), json_schema for a JSON
// answer, vision for image parts, reasoning for reasoning_effort.
func (r Request) Needs() []config.Capability {
	var out []config.Capability
	if r.NeedsTools() {
		out = append(out, config.CapTools)
	}
	if r.JSONAnswer() {
		out = append(out, config.CapJSONSchema)
	}
	for _, m := range r.Messages {
		if m.Images() > 0 {
			out = append(out, config.CapVision)
			break
		}
	}
	if r.ReasoningEffort != "" {
		out = append(out, config.CapReasoning)
	}
	return out
}

// Lacks lists the capabilities of need that m does not have.
func Lacks(m config.ModelConfig, need []config.Capability) []config.Capability {
	var out []config.Capability
	for _, c := range need {
		if !m.Can(c) {
			out = append(out, c)
		}
	}
	return out
}

// validateAgent checks the agent fields of r (docs/agents.md).
func validateAgent(e *ValidationError, r Request, cfg *config.Config, lim reqLimits) {
	validateTools(e, r)
	validateFormat(e, r.ResponseFormat)
	if len(r.Stop) > maxStop {
		e.add("stop", "%d sequences, over the limit of %d", len(r.Stop), maxStop)
	}
	for i, s := range r.Stop {
		if s == "" {
			e.add(fmt.Sprintf("stop[%d]", i), "empty (want a non-empty stop sequence)")
		}
		reqCheckUTF8(e, fmt.Sprintf("stop[%d]", i), s)
	}
	inRange := func(field string, v *float64, lo, hi float64) {
		if v != nil && (math.IsNaN(*v) || *v < lo || *v > hi) {
			e.add(field, "%v is out of range (want %g..%g)", *v, lo, hi)
		}
	}
	inRange("top_p", r.TopP, 0, 1)
	inRange("presence_penalty", r.PresencePenalty, -2, 2)
	inRange("frequency_penalty", r.FrequencyPenalty, -2, 2)
	for _, tok := range sortedKeys(r.LogitBias) {
		if _, err := strconv.ParseUint(tok, 10, 32); err != nil {
			e.add("logit_bias", "key %q is not a token id (want the tokenizer's token ids as strings, e.g. \"1639\")", tok)
		}
		if b := r.LogitBias[tok]; b < -100 || b > 100 {
			e.add("logit_bias", "bias %d for token %s is out of range (want -100..100)", b, tok)
		}
	}
	if t := r.TopLogprobs; t != nil {
		switch {
		case *t < 0 || *t > maxTopLogprobs:
			e.add("top_logprobs", "%d is out of range (want 0..%d)", *t, maxTopLogprobs)
		case !r.Logprobs:
			e.add("top_logprobs", "needs logprobs: true")
		}
	}
	if r.ReasoningEffort != "" && !slices.Contains(reasoningEffort, r.ReasoningEffort) {
		e.add("reasoning_effort", "unknown effort %q (want one of %s)", r.ReasoningEffort, strings.Join(reasoningEffort, ", "))
	}
	validateImages(e, r.Messages, lim)
	validatePassthrough(e, r.Passthrough, cfg)
	validateCapabilities(e, r, cfg)
}

func validateTools(e *ValidationError, r Request) {
	if len(r.Tools) > maxTools {
		e.add("tools", "%d tools, over the limit of %d", len(r.Tools), maxTools)
	}
	seen := map[string]int{}
	for i, t := range r.Tools {
		at := fmt.Sprintf("tools[%d]", i)
		if t.Type != "function" {
			e.add(at+".type", "%q is not supported (want \"function\")", t.Type)
		}
		name := t.Function.Name
		switch {
		case name == "":
			e.add(at+".function.name", "missing")
		case !nameRE.MatchString(name):
			e.add(at+".function.name", "%q is not a function name (want 1 to 64 of a-z, A-Z, 0-9, _ and -)", name)
		default:
			if j, dup := seen[name]; dup {
				e.add(at+".function.name", "%q is offered twice (also tools[%d])", name, j)
			}
			seen[name] = i
		}
		reqCheckUTF8(e, at+".function.description", t.Function.Description)
		if p := t.Function.Parameters; len(p) > 0 && string(p) != "null" {
			if _, err := validated.Schema(p); err != nil {
				e.add(at+".function.parameters", "%s", schemaProblem(err))
			}
		}
	}
	if c := r.ToolChoice; c != nil {
		switch {
		case c.Function != "":
			if !r.HasTool(c.Function) {
				e.add("tool_choice", "names %q, which is not in tools (offered: %s)", c.Function, orNone(r.ToolNames()))
			}
		case !slices.Contains([]string{ToolChoiceNone, ToolChoiceAuto, ToolChoiceRequired}, c.Mode):
			e.add("tool_choice", "unknown mode %q (want none, auto, required or a named function)", c.Mode)
		case c.Mode != ToolChoiceNone && len(r.Tools) == 0:
			e.add("tool_choice", "%q without tools (offer tools, or leave tool_choice out)", c.Mode)
		}
	}
	if r.ParallelToolCalls != nil && len(r.Tools) == 0 {
		e.add("parallel_tool_calls", "only allowed when tools are offered")
	}
}

// schemaProblem words a schema the cache refused: a limit as it is
// ("the schema has 120000 properties; at most 5000"), anything else as
// not a valid JSON Schema.
func schemaProblem(err error) string {
	var limit *structured.LimitError
	if errors.As(err, &limit) {
		return limit.Error()
	}
	return "not a valid JSON Schema: " + err.Error()
}

func validateFormat(e *ValidationError, f *ResponseFormat) {
	if f == nil {
		return
	}
	switch f.Type {
	case FormatText, FormatJSONObject:
		if f.JSONSchema != nil {
			e.add("response_format.json_schema", "only with type json_schema (type is %q)", f.Type)
		}
	case FormatJSONSchema:
		s := f.JSONSchema
		if s == nil {
			e.add("response_format.json_schema", "missing (want {name, schema, strict})")
			return
		}
		if !nameRE.MatchString(s.Name) {
			e.add("response_format.json_schema.name", "%q is not a schema name (want 1 to 64 of a-z, A-Z, 0-9, _ and -)", s.Name)
		}
		if _, err := validated.Schema(s.Schema); err != nil {
			e.add("response_format.json_schema.schema", "%s", schemaProblem(err))
		}
	case "":
		e.add("response_format.type", "missing (want text, json_object or json_schema)")
	default:
		e.add("response_format.type", "unknown type %q (want text, json_object or json_schema)", f.Type)
	}
}

// validateImages checks content parts: known types, images only in user
// messages, http(s) URLs or base64 data URIs of an image type within the
// size cap, and at most the image count.
func validateImages(e *ValidationError, msgs []Message, lim reqLimits) {
	images := 0
	for i, m := range msgs {
		for j, p := range m.Parts {
			at := fmt.Sprintf("messages[%d].content[%d]", i, j)
			switch p.Type {
			case PartText:
				reqCheckUTF8(e, at+".text", p.Text)
				continue
			case PartImageURL:
			default:
				e.add(at+".type", "%q parts are not supported (want text or image_url)", p.Type)
				continue
			}
			images++
			if m.Role != RoleUser {
				e.add(at, "an image in a %q message (images go in user messages)", m.Role)
			}
			if p.ImageURL == nil || p.ImageURL.URL == "" {
				e.add(at+".image_url.url", "missing (want an http(s) URL or a data:image/…;base64, URI)")
				continue
			}
			if !slices.Contains(imageDetail, p.ImageURL.Detail) {
				e.add(at+".image_url.detail", "unknown detail %q (want auto, low or high)", p.ImageURL.Detail)
			}
			if prob := imageProblem(p.ImageURL.URL, lim.maxImageBytes); prob != "" {
				e.add(at+".image_url.url", "%s", prob)
			}
		}
	}
	if images > lim.maxImages {
		e.add("messages", "%d images, over the limit of %d", images, lim.maxImages)
	}
}

// imageProblem says what is wrong with an image URL, or "".
func imageProblem(u string, maxBytes int) string {
	if rest, ok := strings.CutPrefix(u, "data:"); ok {
		meta, data, ok := strings.Cut(rest, ",")
		typ, enc, _ := strings.Cut(meta, ";")
		switch {
		case !ok || enc != "base64":
			return "a data URI that is not base64 (want data:image/png;base64,…)"
		case !slices.Contains(imageTypes, typ):
			return fmt.Sprintf("data URI of type %q (want one of %s)", typ, strings.Join(imageTypes, ", "))
		}
		n := base64.StdEncoding.DecodedLen(len(data))
		if n > maxBytes {
			return fmt.Sprintf("an inline image of about %s, over the limit of %s (send large images by URL)", reqByteSize(n), reqByteSize(maxBytes))
		}
		if _, err := base64.StdEncoding.DecodeString(data); err != nil {
			return "a data URI whose base64 does not decode"
		}
		return ""
	}
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return "not an http(s) URL or a data:image/…;base64, URI"
	}
	return ""
}

// validatePassthrough checks that every passthrough field is one a model
// of the ladder forwards, holding valid JSON.
func validatePassthrough(e *ValidationError, fields map[string]json.RawMessage, cfg *config.Config) {
	if len(fields) == 0 {
		return
	}
	allowed := map[string]bool{}
	if cfg != nil {
		for _, m := range cfg.Models {
			for _, f := range m.Passthrough {
				allowed[f] = true
			}
		}
	}
	for _, name := range sortedKeys(fields) {
		at := "passthrough." + name
		switch {
		case !allowed[name]:
			e.add(at, "not a passthrough field of any model (the policy's passthrough lists: %s)", orNone(sortedKeys(allowed)))
		case !json.Valid(fields[name]):
			e.add(at, "not valid JSON")
		}
	}
}

// validateCapabilities checks that a model can serve r: the preferred
// model, else at least one rung of the ladder.
func validateCapabilities(e *ValidationError, r Request, cfg *config.Config) {
	need := r.Needs()
	if len(need) == 0 || cfg == nil || len(cfg.Models) == 0 {
		return
	}
	if r.Model != "" {
		if m, ok := cfg.Model(r.Model); ok {
			if lack := Lacks(m, need); len(lack) > 0 {
				e.add(capField(lack[0]), "model %s cannot serve it (it lacks %s; its capabilities: %s)",
					m.Name, JoinCaps(lack), orNone(capNames(m.Capabilities)))
			}
		}
		return
	}
	for _, m := range cfg.Models {
		if len(Lacks(m, need)) == 0 {
			return
		}
	}
	e.add(capField(need[0]), "no model of the ladder can serve it (it needs %s)", JoinCaps(need))
}

// capField is the request field that makes a request need c.
func capField(c config.Capability) string {
	switch c {
	case config.CapTools:
		return "tools"
	case config.CapJSONSchema:
		return "response_format"
	case config.CapVision:
		return "messages"
	}
	return "reasoning_effort"
}

func capNames(cs []config.Capability) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = string(c)
	}
	return out
}

// JoinCaps words capabilities as "tools, vision".
func JoinCaps(cs []config.Capability) string { return strings.Join(capNames(cs), ", ") }

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
