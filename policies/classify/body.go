package classify

import (
	"encoding/json"
	"fmt"
	"html"
	"regexp"
	"strings"
	"unicode/utf8"
)

// maxMessageLen bounds Verdict.Message, in runes.
const maxMessageLen = 300

// errorInfo is what an error body says.
type errorInfo struct {
	code, typ, message string
	isHTML             bool   // the body was an HTML page
	isError            bool   // the body is an error object ({"error":…} or "object":"error")
	note               string // extra detail for the reason
	raw                []byte
}

// parseErrorBody reads the error dialects seen in the wild:
// {"error":{"message","type","code"}} (OpenAI), {"error":"text"},
// {"object":"error","message","type","code"} (vLLM), {"detail":…}
// (FastAPI), {"type":"error","error":{…}} (Anthropic), HTML pages, text.
func parseErrorBody(body []byte) errorInfo {
	info := errorInfo{raw: body}
	s := strings.TrimSpace(string(body))
	if s == "" {
		return info
	}
	if s[0] == '{' {
		var top map[string]json.RawMessage
		if json.Unmarshal([]byte(s), &top) == nil {
			readErrorFields(&info, top)
			if e, ok := top["error"]; ok && string(e) != "null" {
				info.isError = true
				var obj map[string]json.RawMessage
				var text string
				switch {
				case json.Unmarshal(e, &obj) == nil:
					readErrorFields(&info, obj)
				case json.Unmarshal(e, &text) == nil:
					info.message = text
				}
			}
			if d, ok := top["detail"]; ok && info.message == "" {
				info.message = detailText(d)
			}
			var object string
			if o, ok := top["object"]; ok && json.Unmarshal(o, &object) == nil && object == "error" {
				info.isError = true
			}
			return info
		}
	}
	if looksLikeHTML(s) {
		info.isHTML = true
		info.message = htmlSummary(s)
		return info
	}
	info.message = s
	return info
}

// detailText reads FastAPI's "detail": a text, or a list of validation
// errors {"loc":[…],"msg":…}.
func detailText(d json.RawMessage) string {
	var text string
	if json.Unmarshal(d, &text) == nil {
		return text
	}
	var items []struct {
		Loc []any  `json:"loc"`
		Msg string `json:"msg"`
	}
	if json.Unmarshal(d, &items) == nil {
		var parts []string
		for _, it := range items {
			if it.Msg == "" {
				continue
			}
			loc := make([]string, len(it.Loc))
			for i, l := range it.Loc {
				loc[i] = fmt.Sprint(l)
			}
			if len(loc) > 0 {
				parts = append(parts, strings.Join(loc, ".")+": "+it.Msg)
			} else {
				parts = append(parts, it.Msg)
			}
		}
		if len(parts) > 0 {
			return strings.Join(parts, "; ")
		}
	}
	return string(d)
}

// readErrorFields copies message, type and code from one JSON object,
// keeping values already found.
func readErrorFields(info *errorInfo, obj map[string]json.RawMessage) {
	str := func(key string) string {
		raw, ok := obj[key]
		if !ok {
			return ""
		}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
		var n json.Number
		if json.Unmarshal(raw, &n) == nil {
			return n.String()
		}
		return ""
	}
	if info.message == "" {
		info.message = str("message")
	}
	if info.typ == "" {
		if t := str("type"); t != "error" { // Anthropic's envelope says "type":"error"
			info.typ = t
		}
	}
	if info.code == "" {
		info.code = str("code")
	}
}

func anyString(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	}
	return fmt.Sprint(v)
}

func looksLikeHTML(s string) bool {
	head := strings.ToLower(s[:min(len(s), 512)])
	return strings.HasPrefix(head, "<") && containsAny(head, "<html", "<!doctype", "<head", "<body", "<title", "<h1", "<center")
}

var (
	htmlTitleRE  = regexp.MustCompile(`(?is)<title[^>]*>(.*?)</title>`)
	htmlH1RE     = regexp.MustCompile(`(?is)<h1[^>]*>(.*?)</h1>`)
	htmlDropRE   = regexp.MustCompile(`(?is)<(script|style)[^>]*>.*?</(script|style)>`)
	htmlTagRE    = regexp.MustCompile(`(?s)<[^>]*>`)
	whitespaceRE = regexp.MustCompile(`\s+`)
	thinkRE      = regexp.MustCompile(`(?is)<(think|thinking)>.*?(</(think|thinking)>|\z)`)
)

// htmlSummary reduces an HTML error page to its title (or first heading,
// or its text).
func htmlSummary(s string) string {
	for _, re := range []*regexp.Regexp{htmlTitleRE, htmlH1RE} {
		if m := re.FindStringSubmatch(s); m != nil {
			if t := collapse(html.UnescapeString(htmlTagRE.ReplaceAllString(m[1], " "))); t != "" {
				return t
			}
		}
	}
	s = htmlDropRE.ReplaceAllString(s, " ")
	return collapse(html.UnescapeString(htmlTagRE.ReplaceAllString(s, " ")))
}

// StripThinking removes <think>…</think> (and <thinking>) blocks from a
// model's answer; an unclosed block runs to the end. Content that is empty
// after stripping is a reasoning-only answer (output_truncated).
func StripThinking(content string) string {
	return strings.TrimSpace(thinkRE.ReplaceAllString(content, ""))
}

func collapse(s string) string { return strings.TrimSpace(whitespaceRE.ReplaceAllString(s, " ")) }

// cleanMessage makes an upstream message fit for a reason and history:
// HTML reduced to a title, whitespace collapsed, at most maxMessageLen
// runes, bytes that are not UTF-8 replaced (a protobuf string, such as a
// Temporal failure message, must be valid UTF-8).
func cleanMessage(s string) string {
	s = strings.TrimSpace(strings.ToValidUTF8(s, "\uFFFD"))
	if s == "" {
		return ""
	}
	if looksLikeHTML(s) {
		s = htmlSummary(s)
	}
	return truncateRunes(collapse(s), maxMessageLen)
}

func truncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

func oneLine(s string, n int) string { return truncateRunes(collapse(s), n) }
