package classify

import (
	"net/http"
	"regexp"
	"strings"

	"github.com/durable-llm/durable-llm/policies/failure"
)

// classByCode recognises the classes an error code or message names,
// whatever the status. It returns None when they name none.
func classByCode(info errorInfo, status int) (failure.Class, string) {
	code := strings.ToLower(info.code + " " + info.typ)
	msg := strings.ToLower(info.message)
	has := func(words ...string) bool {
		for _, w := range words {
			if strings.Contains(code, w) {
				return true
			}
		}
		return false
	}
	switch {
	case has("context_length_exceeded", "context_length", "string_above_max_length"):
		return failure.ContextLengthExceeded, "context length"
	case has("insufficient_quota", "quota_exceeded", "billing_hard_limit", "billing_error", "insufficient_balance", "arrearage"),
		status != http.StatusTooManyRequests && has("quota"),
		containsAny(msg, "exceeded your current quota", "insufficient quota", "insufficient balance", "quota exhausted", "余额不足"):
		return failure.Auth, "quota exhausted"
	case has("queue_full", "overloaded", "server_busy", "capacity"):
		return failure.QueueFull, "upstream queue full"
	case has("content_filter", "content_policy", "data_inspection_failed", "responsibleaipolicyviolation", "safety"):
		return failure.ContentFilter, "content filtered"
	case has("model_not_found", "modelnotfound", "model_not_available"):
		return failure.ModelNotFound, "model not found"
	case has("invalid_api_key", "invalid_authentication", "authentication_error", "permission_error", "permission_denied", "unauthorized"):
		return failure.Auth, "not authorised"
	case has("rate_limit"):
		return failure.RateLimited, "rate limited"
	}
	if status != http.StatusTooManyRequests && saysContextLength(msg) {
		return failure.ContextLengthExceeded, "message says the context length is exceeded"
	}
	if (status == http.StatusNotFound || status == http.StatusBadRequest || status < 300) && saysModelMissing(msg) {
		return failure.ModelNotFound, "message says the model does not exist"
	}
	return failure.None, ""
}

var (
	contextLengthPhrases = []string{
		"maximum context length", "context length", "context_length", "context window",
		"context size", "too many tokens", "prompt is too long", "input is too long",
		"input token count", "`inputs` tokens", "reduce the length of the messages",
		"maximum input length", "上下文长度", "超出最大长度",
	}
	modelMissingRE = regexp.MustCompile(`\bmodel\b.{0,120}\b(does not exist|doesn't exist|not found|not exist|is not available|unknown)\b|\bno such model\b|\bunknown model\b|模型不存在`)
)

func saysContextLength(msg string) bool { return containsAny(msg, contextLengthPhrases...) }

func saysModelMissing(msg string) bool { return modelMissingRE.MatchString(msg) }

// busyRE are the wordings of a 503 that refuses a request for want of
// room (backpressure): Ollama's "server busy, please try again.  maximum
// pending requests exceeded", "overloaded" (OpenAI's "The engine is
// currently overloaded", vLLM's, TGI's), "queue is full", "at capacity",
// "too many (pending, concurrent) requests".
var busyRE = regexp.MustCompile(`\bbusy\b|overload|\bqueue (is )?full\b|queue_full|pending requests|\b(at|over|out of|no|insufficient) capacity\b|too many (pending |concurrent |simultaneous )?requests|繁忙|过载`)

// downRE are the wordings of a 503 from a server that is down, whatever
// else it says: a model still loading (llama.cpp's "Loading model"), a
// proxy whose backend is dead (Envoy's "no healthy upstream", "upstream
// connect error", HAProxy's "no server is available"), a refused
// connection. The breaker must see those.
var downRE = regexp.MustCompile(`\bloading\b|\bstarting up\b|\bnot ready\b|no healthy upstream|upstream connect error|no server is available|no available (server|backend|upstream)|connection refused`)

// saysBusy reports whether a 503's body refuses for want of room rather
// than for being down: a JSON or text body (an HTML page is a proxy's)
// with a busy wording (busyRE) and none of being down (downRE).
func saysBusy(info errorInfo) bool {
	if info.isHTML {
		return false
	}
	text := strings.ToLower(info.message + " " + info.code + " " + info.typ)
	return busyRE.MatchString(text) && !downRE.MatchString(text)
}

// apacheStock503 is the sentence of Apache httpd's stock 503 page, which
// mod_proxy sends for a dead backend: its "maintenance" announces none.
const apacheStock503 = "unable to service your request due to maintenance downtime or capacity problems"

func saysMaintenance(info errorInfo) bool {
	text := collapse(strings.ToLower(info.message + " " + info.code + " " + info.typ + " " + string(info.raw)))
	text = strings.ReplaceAll(text, apacheStock503, "")
	return containsAny(text, "maintenance", "维护")
}

func containsAny(s string, subs ...string) bool {
	for _, w := range subs {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}
