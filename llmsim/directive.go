package llmsim

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Directive is an in-prompt fault instruction written in the last user
// message:
//
//	[[sim fault=<name> times=<k> model=<m> retry_after=2s latency=3s]]
//
// It applies Spec to the first Times attempts of the conversation that go
// to Spec.Model (any model when empty). Several directives in one message
// apply one after the other: the second starts when the first is used up.
//
// [[sim tokens=N]] (alone or next to a fault) sets the answer's length to
// exactly N completion tokens, on every attempt and every model.
type Directive struct {
	// Spec is the fault and its parameters (Kind "" for a directive that
	// only sets Tokens).
	Spec FaultSpec
	// Times is how many attempts get the fault; TimesAlways means every one.
	Times int
	// Tokens is the answer's length in completion tokens (0: not set).
	Tokens int
	// Recall is a fact the question asks the model to recall from the
	// rest of the conversation (see Summarize; "" : none).
	Recall string
	// Raw is the directive's text as written.
	Raw string
}

// TimesAlways makes a directive apply to every attempt (times=always).
const TimesAlways = -1

var directiveRE = regexp.MustCompile(`\[\[sim\b([^\]]*)\]\]`)

var directiveAttrs = []string{"fault", "kind", "times", "model", "retry_after", "retry_after_ms", "retry_header", "latency", "status", "chunks", "duration", "window", "after", "tokens", "recall"}

// ParseDirectives returns the directives in text, in order. Attributes are
// key=value pairs separated by spaces: fault (or kind), times (a count,
// default 1, or "always"), model, retry_after (duration), retry_after_ms
// (milliseconds; implies retry_header=ms), retry_header, latency
// (duration), status, chunks, duration, window, after — the FaultSpec
// fields — and tokens (the answer's length; a directive may carry only
// tokens).
func ParseDirectives(text string) ([]Directive, error) {
	var out []Directive
	for _, m := range directiveRE.FindAllStringSubmatch(text, -1) {
		d := Directive{Times: 1, Raw: m[0]}
		for _, kv := range strings.Fields(m[1]) {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || v == "" {
				return nil, fmt.Errorf("directive %s: %q is not key=value", m[0], kv)
			}
			var err error
			switch k {
			case "fault", "kind":
				d.Spec.Kind, err = ParseFault(v)
			case "times":
				if v == "always" || v == "*" {
					d.Times = TimesAlways
				} else if d.Times, err = strconv.Atoi(v); err == nil && d.Times < 1 {
					err = fmt.Errorf("times must be at least 1 or \"always\"")
				}
			case "model":
				d.Spec.Model = v
			case "retry_after":
				err = d.Spec.RetryAfter.set(v, false)
			case "retry_after_ms":
				var ms int
				if ms, err = strconv.Atoi(v); err == nil {
					d.Spec.RetryAfter = Duration(ms) * Duration(1e6)
					if d.Spec.RetryHeader == "" {
						d.Spec.RetryHeader = RetryHeaderMS
					}
				}
			case "retry_header":
				d.Spec.RetryHeader = v
			case "no_quota":
				d.Spec.NoQuota, err = strconv.ParseBool(v)
			case "latency":
				var l Duration
				err = l.set(v, false)
				d.Spec.Latency = Latency{Value: l}
			case "status":
				d.Spec.Status, err = strconv.Atoi(v)
			case "chunks":
				d.Spec.Chunks, err = strconv.Atoi(v)
			case "duration":
				err = d.Spec.Duration.set(v, false)
			case "window":
				d.Spec.Window, err = strconv.Atoi(v)
			case "after":
				var n int
				if n, err = strconv.Atoi(v); err == nil {
					d.Spec.After = &n
				}
			case "recall":
				d.Recall = v
			case "tokens":
				if d.Tokens, err = strconv.Atoi(v); err == nil && d.Tokens < 1 {
					err = fmt.Errorf("must be at least 1, got %d", d.Tokens)
				}
			default:
				err = fmt.Errorf("unknown attribute%s", suggest(k, directiveAttrs))
			}
			if err != nil {
				return nil, fmt.Errorf("directive %s: %s: %v", m[0], k, err)
			}
		}
		if d.Spec.Kind == FaultNone {
			if d.Tokens > 0 || d.Recall != "" {
				out = append(out, d)
				continue
			}
			return nil, fmt.Errorf("directive %s: fault=<name>, tokens=<n> or recall=<fact> is required", m[0])
		}
		errs := &errList{source: "directive " + m[0]}
		d.Spec.validate("", nil, errs)
		if err := errs.err(); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

var stripRE = regexp.MustCompile(`[ \t]*\[\[sim\b[^\]]*\]\][ \t]*`)

// StripDirectives removes every directive from text and trims it.
func StripDirectives(text string) string {
	if !strings.Contains(text, "[[sim") {
		return text
	}
	return strings.TrimSpace(stripRE.ReplaceAllString(text, " "))
}
