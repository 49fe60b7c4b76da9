package frontdoor

import (
	"io"
	"mime"
	"net/http"
	"strings"
)

// routes is the front door's route table. Each route's handler is served
// for the tenant of the request's bearer token (authed); its path asked
// with another method is a 405 whose Allow header names every method the
// table serves on that path, and an unknown URL a 404, in OpenAI's error
// shape like every other answer (not the mux's own plain-text ones).
// GET /healthz needs no token.
func (h *Handler) routes() *http.ServeMux {
	mux := http.NewServeMux()
	table := []struct {
		pattern string
		serve   func(w http.ResponseWriter, r *http.Request, tenant string)
	}{
		{"POST /v1/messages", h.createMessage},                   // the same, in Anthropic's Messages API
		{"POST /v1/messages/count_tokens", h.countTokens},        // a Messages API prompt's tokens
		{"POST /v1/chat/completions", h.chatCompletions},         // start or attach to a durable call
		{"POST /v1/responses", h.createResponse},                 // the same, in the Responses API
		{"GET /v1/responses/{id}", h.getResponse},                // a response (?stream=true: its events)
		{"DELETE /v1/responses/{id}", h.deleteResponse},          // delete a stored response
		{"POST /v1/responses/{id}/cancel", h.cancelResponse},     // cancel a background response
		{"GET /v1/responses/{id}/input_items", h.listInputItems}, // a stored response's input
		{"GET /v1/models", h.listModels},                         // the ladder's models
		{"GET /v1/models/{model}", h.getModel},                   // one of them
		{"GET /v1/calls/{id}", h.getCall},                        // a call started with Prefer: respond-async
		{"DELETE /v1/calls/{id}", h.cancelCall},                  // cancel the tenant's own running call
		{"POST /v1/calls/{id}/feedback", h.postFeedback},         // what the user did after the call
	}
	// allow is each path's Allow header: its methods in table order.
	allow := map[string]string{}
	for _, rt := range table {
		method, path, _ := strings.Cut(rt.pattern, " ")
		if allow[path] != "" {
			method = allow[path] + ", " + method
		}
		allow[path] = method
	}
	for _, rt := range table {
		method, path, _ := strings.Cut(rt.pattern, " ")
		mux.HandleFunc(rt.pattern, h.authed(method, allow[path], rt.serve))
	}
	for path, methods := range allow {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) { refuseMethod(w, r, methods) })
	}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if isMessagesAPI(r.URL.Path) {
			w = &anthropicWire{ResponseWriter: w}
		}
		closeEarly(w)
		unknownURL(r).write(w)
	})
	return mux
}

// refuseMethod answers 405 to a request of a route's path whose method is
// not among allow (the path's methods, comma-separated), without reading
// its body.
func refuseMethod(w http.ResponseWriter, r *http.Request, allow string) {
	if isMessagesAPI(r.URL.Path) {
		w = &anthropicWire{ResponseWriter: w}
	}
	closeEarly(w)
	w.Header().Set("Allow", allow)
	methodNotAllowed(r, allow).write(w)
}

// authed checks the method (a GET pattern matches HEAD too, which is
// refused with the path's methods, allow), the headers and the bearer
// token, then serves with the token's tenant.
func (h *Handler) authed(method, allow string, next func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		rec, _ := w.(*recorder)
		anthropic := isMessagesAPI(r.URL.Path)
		if anthropic {
			w = &anthropicWire{ResponseWriter: w}
		}
		if r.Method != method {
			refuseMethod(w, r, allow)
			return
		}
		if e := headerProblem(r); e != nil {
			closeEarly(w)
			e.write(w)
			return
		}
		token := bearerToken(r)
		if anthropic && token == "" {
			token = strings.TrimSpace(r.Header.Get(HeaderAnthropicKey))
		}
		if token == "" {
			closeEarly(w)
			if anthropic {
				missingAnthropicKey().write(w)
			} else {
				missingAPIKey().write(w)
			}
			return
		}
		tenant, ok := h.o.Tenants.Lookup(token)
		if !ok {
			closeEarly(w)
			invalidAPIKey().write(w)
			return
		}
		if rec != nil {
			rec.tenant = tenant
		}
		next(w, r, tenant)
	}
}

// HeaderAnthropicKey carries the API key of Anthropic's SDKs (the
// Messages API routes also take a bearer token).
const HeaderAnthropicKey = "X-Api-Key"

// isMessagesAPI reports whether path is a route of Anthropic's Messages
// API, answered in its shapes.
func isMessagesAPI(path string) bool {
	return path == "/v1/messages" || strings.HasPrefix(path, "/v1/messages/")
}

// singleHeaders are the request headers the front door reads one value
// of: sent twice, which one counts would depend on who reads them (a
// proxy in front may check the other), so a second one is refused.
var singleHeaders = []string{"Authorization", HeaderAnthropicKey, "Content-Type", HeaderIdempotencyKey, HeaderSessionID,
	HeaderScenario, HeaderDeadlineMS, HeaderLastEventID}

// headerProblem checks what every authenticated route reads of a
// request's headers before its token: each of singleHeaders at most once,
// and the body of a POST declared as JSON in UTF-8 (no Content-Type: JSON
// is assumed). It returns the refusal, or nil.
func headerProblem(r *http.Request) *apiError {
	for _, name := range singleHeaders {
		if n := len(r.Header.Values(name)); n > 1 {
			return duplicateHeader(name, n)
		}
	}
	ct := r.Header.Get("Content-Type")
	if r.Method != http.MethodPost || ct == "" {
		return nil
	}
	mt, params, err := mime.ParseMediaType(ct)
	switch {
	case err != nil:
		return invalidContentType()
	case mt != "application/json" && !strings.HasSuffix(mt, "+json"):
		return unsupportedMediaType(false)
	case params["charset"] != "" && !strings.EqualFold(params["charset"], "utf-8"):
		return unsupportedMediaType(true)
	}
	return nil
}
