package codec

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"html"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
)

// MaxRequestBytes bounds a codec-server request body: Temporal payloads are
// at most 2 MB and the Web UI sends a page of them at once.
const MaxRequestBytes = 32 << 20

// MinTokenLength is the shortest bearer token the codec server takes.
const MinTokenLength = 32

// MetadataDecodeError is the metadata entry of a payload that /decode
// could not decode: the payload comes back as it was, with this entry
// saying why (never key material), and the rest of the batch decodes.
const MetadataDecodeError = "decode-error"

// CookieName is the cookie that POST /login sets for the Web UI: a
// browser cannot send a bearer token, but the UI sends cookies when its
// codec settings include credentials (TEMPORAL_CODEC_INCLUDE_CREDENTIALS).
const CookieName = "durable-llm-codec"

// cookieLife is how long a browser keeps the login cookie.
const cookieLife = 12 * time.Hour

// ErrTokenRequired is returned by CheckExposure for a codec server that
// would serve without a token on an address other than loopback.
var ErrTokenRequired = errors.New("a codec server that is not bound to loopback needs a bearer token")

// HandlerOptions configure NewHTTPHandler.
type HandlerOptions struct {
	// Origins are the browser origins allowed by CORS, e.g. the Web UI's
	// "http://localhost:8233"; those listed may send credentials (the
	// login cookie). "*" allows any origin without credentials: only
	// callers that send the token themselves. Default none: only
	// non-browser clients (the Temporal CLI, SDKs) can call.
	Origins []string
	// Token, when set, must come with every /encode and /decode, as
	// "Authorization: Bearer <token>" (the Temporal CLI's --codec-auth)
	// or as the cookie POST /login sets. Default none: /decode answers
	// loopback clients only and /encode is refused, since it would
	// encrypt anything for anyone.
	Token string
	// BodyTimeout bounds reading a request's body (default 30 s): a client
	// that trickles a 32 MiB body cannot hold the server. Refusals close
	// the connection without reading the body at all.
	BodyTimeout time.Duration
}

// closeEarly closes the connection after a refusal instead of reading
// the body the request still sends (Go's server would read up to 256 KB
// of it first, with no deadline).
func closeEarly(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
}

// NewHTTPHandler serves the standard codec-server API for codec: POST
// /encode and /decode with a JSON Payloads body (any path prefix, as the
// Web UI may add the namespace), CORS for the Web UI, a bearer token,
// GET and POST /login for browsers, and GET /healthz. A payload that does
// not decode comes back as it was, marked with MetadataDecodeError, and
// the others decode. Error bodies never carry key material.
func NewHTTPHandler(codec converter.PayloadCodec, o HandlerOptions) http.Handler {
	payloads := converter.NewPayloadCodecHTTPHandler(eachDecoded{codec})
	allowed := map[string]bool{}
	for _, origin := range o.Origins {
		if origin = strings.TrimRight(strings.TrimSpace(origin), "/"); origin != "" {
			allowed[origin] = true
		}
	}
	if o.BodyTimeout <= 0 {
		o.BodyTimeout = 30 * time.Second
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if origin := r.Header.Get("Origin"); origin != "" {
			h := w.Header()
			switch {
			case allowed[origin]:
				h.Set("Access-Control-Allow-Origin", origin)
				h.Set("Access-Control-Allow-Credentials", "true")
			case allowed["*"]:
				// Any origin, never with credentials: a page on any site
				// must not ride on a browser's login cookie.
				h.Set("Access-Control-Allow-Origin", "*")
			}
			if h.Get("Access-Control-Allow-Origin") != "" {
				h.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
				h.Set("Access-Control-Allow-Headers", "Content-Type, X-Namespace, Authorization")
				h.Set("Access-Control-Max-Age", "600")
			}
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
		case r.URL.Path == "/login":
			login(w, r, o.Token)
			return
		}
		switch {
		case o.Token != "":
			if !bearerOK(r.Header.Get("Authorization"), o.Token) && !cookieOK(r, o.Token, time.Now()) {
				closeEarly(w)
				w.Header().Set("WWW-Authenticate", `Bearer realm="codec"`)
				http.Error(w, "codec server: missing or wrong bearer token", http.StatusUnauthorized)
				return
			}
		case strings.HasSuffix(r.URL.Path, "/encode"):
			closeEarly(w)
			http.Error(w, "codec server: /encode is off without a token (set CODEC_SERVER_TOKEN): it would encrypt anything for anyone who can reach the server", http.StatusForbidden)
			return
		case !loopbackPeer(r.RemoteAddr):
			closeEarly(w)
			http.Error(w, "codec server: without a token only loopback clients are served (set CODEC_SERVER_TOKEN)", http.StatusForbidden)
			return
		}
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(o.BodyTimeout))
		r.Body = http.MaxBytesReader(w, r.Body, MaxRequestBytes)
		payloads.ServeHTTP(w, r)
	})
}

// eachDecoded decodes payload by payload: one that fails comes back as it
// was, marked with MetadataDecodeError, and the batch still decodes (the
// Web UI shows a page of payloads at once). Encode is the codec's.
type eachDecoded struct{ converter.PayloadCodec }

func (c eachDecoded) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		got, err := c.PayloadCodec.Decode([]*commonpb.Payload{p})
		if err == nil && len(got) == 1 {
			out[i] = got[0]
			continue
		}
		if err == nil {
			err = fmt.Errorf("the codec returned %d payloads for 1", len(got))
		}
		marked := &commonpb.Payload{Metadata: make(map[string][]byte, len(p.GetMetadata())+1), Data: p.GetData()}
		for k, v := range p.GetMetadata() {
			marked.Metadata[k] = v
		}
		marked.Metadata[MetadataDecodeError] = []byte(err.Error())
		out[i] = marked
	}
	return out, nil
}

// CheckExposure is the codec server's start-up check: listening on addr
// (the address it is bound to) with token, it refuses a missing token
// unless addr is a loopback address, and a token shorter than
// MinTokenLength. The error never shows the token.
func CheckExposure(addr net.Addr, token string) error {
	if token != "" && len(token) < MinTokenLength {
		return fmt.Errorf("the bearer token is %d characters, at least %d are needed (e.g. `openssl rand -hex 32`)", len(token), MinTokenLength)
	}
	if token == "" && !loopbackPeer(addr.String()) {
		return fmt.Errorf("%w: bound to %s, it would decrypt history for anyone who can reach it; set a token of at least %d characters (e.g. `openssl rand -hex 32`) or bind to 127.0.0.1",
			ErrTokenRequired, addr, MinTokenLength)
	}
	return nil
}

// loopbackPeer reports whether hostport (an "ip:port") is a loopback
// address.
func loopbackPeer(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

func bearerOK(header, token string) bool {
	got, ok := strings.CutPrefix(header, "Bearer ")
	if !ok {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(token)) == 1
}

// cookieValue is the login cookie of token issued at: the instant and a
// MAC of it keyed with the token, so the cookie never holds the token and
// expires after cookieLife on the server's clock too (a copied cookie is
// not good until the token changes).
func cookieValue(token string, at time.Time) string {
	ts := strconv.FormatInt(at.Unix(), 10)
	return ts + "." + cookieMAC(token, ts)
}

func cookieMAC(token, ts string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("durable-llm codec-server login " + ts))
	return hex.EncodeToString(m.Sum(nil))
}

// cookieOK reports whether r carries a login cookie of token issued less
// than cookieLife ago.
func cookieOK(r *http.Request, token string, now time.Time) bool {
	c, err := r.Cookie(CookieName)
	if err != nil || token == "" {
		return false
	}
	ts, mac, ok := strings.Cut(c.Value, ".")
	if !ok || subtle.ConstantTimeCompare([]byte(mac), []byte(cookieMAC(token, ts))) != 1 {
		return false
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return false
	}
	at := time.Unix(sec, 0)
	return now.Sub(at) < cookieLife && at.Before(now.Add(time.Minute))
}

// login serves GET /login, a form for the token, and POST /login, which
// checks it and sets the cookie the Web UI then sends (HttpOnly,
// SameSite=Strict: a page of another site cannot use it).
func login(w http.ResponseWriter, r *http.Request, token string) {
	w.Header().Set("Cache-Control", "no-store")
	if token == "" {
		http.Error(w, "codec server: no token is set, there is nothing to log in to", http.StatusNotFound)
		return
	}
	page := func(status int, msg string) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(status)
		fmt.Fprintf(w, `<!doctype html><title>Codec server</title><p>%s</p>
<form method="post" action="/login"><input type="password" name="token" autocomplete="off" placeholder="CODEC_SERVER_TOKEN" size="70"> <button>Log in</button></form>`,
			html.EscapeString(msg))
	}
	switch r.Method {
	case http.MethodGet:
		page(http.StatusOK, "Log in with CODEC_SERVER_TOKEN so that the Web UI (with codec credentials included) can decode payloads in this browser.")
	case http.MethodPost:
		r.Body = http.MaxBytesReader(w, r.Body, 4096)
		if err := r.ParseForm(); err != nil || subtle.ConstantTimeCompare([]byte(r.PostFormValue("token")), []byte(token)) != 1 {
			page(http.StatusUnauthorized, "Wrong token.")
			return
		}
		http.SetCookie(w, &http.Cookie{Name: CookieName, Value: cookieValue(token, time.Now()), Path: "/", MaxAge: int(cookieLife / time.Second),
			HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
		page(http.StatusOK, "Logged in for 12 hours: go back to the Web UI and reload it.")
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "codec server: GET or POST /login", http.StatusMethodNotAllowed)
	}
}
