package codec

import (
	"crypto/subtle"
	"net/http"
	"strings"

	"go.temporal.io/sdk/converter"
)

// MaxRequestBytes bounds a codec-server request body: Temporal payloads are
// at most 2 MB and the Web UI sends a page of them at once.
const MaxRequestBytes = 32 << 20

// HandlerOptions configure NewHTTPHandler.
type HandlerOptions struct {
	// Origins are the browser origins allowed by CORS, e.g. the Web UI's
	// "http://localhost:8233"; "*" allows any. Default none: only
	// non-browser clients (the Temporal CLI, SDKs) can call.
	Origins []string
	// Token, when set, must be sent as "Authorization: Bearer <token>" on
	// /encode and /decode (the Temporal CLI's --codec-auth). Default: no
	// authentication; keep the server on a private address.
	Token string
}

// NewHTTPHandler serves the standard codec-server API for codec: POST
// /encode and /decode with a JSON Payloads body (any path prefix, as the
// Web UI may add the namespace), CORS for the Web UI, an optional bearer
// token, and GET /healthz. Error bodies never carry key material.
func NewHTTPHandler(codec converter.PayloadCodec, o HandlerOptions) http.Handler {
	payloads := converter.NewPayloadCodecHTTPHandler(codec)
	allowed := map[string]bool{}
	for _, origin := range o.Origins {
		if origin = strings.TrimRight(strings.TrimSpace(origin), "/"); origin != "" {
			allowed[origin] = true
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if origin := r.Header.Get("Origin"); origin != "" && (allowed[origin] || allowed["*"]) {
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Credentials", "true")
			h.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "Content-Type, X-Namespace, Authorization")
			h.Set("Access-Control-Max-Age", "600")
			h.Add("Vary", "Origin")
		}
		switch {
		case r.Method == http.MethodOptions:
			w.WriteHeader(http.StatusNoContent)
			return
		case r.Method == http.MethodGet && r.URL.Path == "/healthz":
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			_, _ = w.Write([]byte("ok\n"))
			return
		}
		if o.Token != "" && !bearerOK(r.Header.Get("Authorization"), o.Token) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="codec"`)
			http.Error(w, "codec server: missing or wrong bearer token", http.StatusUnauthorized)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxRequestBytes)
		payloads.ServeHTTP(w, r)
	})
}

func bearerOK(header, token string) bool {
	got, ok := strings.CutPrefix(header, "Bearer ")
	if !ok {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(token)) == 1
}
