package activities

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/policies/callstate"
	"github.com/durable-llm/durable-llm/policies/config"
)

// testKey is an API key with the characters JSON may escape.
const testKey = "sk-live/Xq7+b9Zr/k2Lm8Np4Qs6<Tv0>"

// jsonEscaped writes every character of s as a \u escape, as some
// gateways do.
func jsonEscaped(s string) string {
	var b strings.Builder
	for _, r := range s {
		fmt.Fprintf(&b, `\u%04x`, r)
	}
	return b.String()
}

// TestUpstreamEchoesOfTheKeyAreRedacted: an upstream that quotes the key
// it refused — whole, JSON-escaped, cut short, or in its error code and
// type — never gets any 8-character part of it into the attempt's
// outcome or its error (history, logs).
func TestUpstreamEchoesOfTheKeyAreRedacted(t *testing.T) {
	plainJSON, _ := json.Marshal(testKey) // escapes < and > as \u003c, \u003e
	cases := []struct {
		name, body string
		status     int
	}{
		{"whole in the message", `{"error":{"message":"Incorrect API key provided: ` + strings.Trim(string(plainJSON), `"`) + `","type":"invalid_request_error","code":"invalid_api_key"}}`, 401},
		{"JSON-escaped", `{"error":{"message":"bad key ` + jsonEscaped(testKey) + `","type":"invalid_request_error","code":"invalid_api_key"}}`, 401},
		{"slashes escaped", `{"error":{"message":"bad key ` + strings.ReplaceAll(testKey, "/", `\/`) + `"}}`, 401},
		{"cut short", `{"error":{"message":"key ` + testKey[:14] + `… is revoked","type":"auth"}}`, 401},
		{"in the code and type", `{"error":{"message":"no","type":"key ` + testKey[3:20] + `","code":"bad-` + testKey[10:] + `"}}`, 401},
		{"unrecognised body", `{"error":{"message":"teapot says ` + testKey[5:] + `","type":"` + testKey + `","code":"` + testKey[:9] + `x"}}`, 418},
		{"plain text", "denied for " + testKey[2:30], 403},
		{"cut body", `{"error":{"message":"key ` + jsonEscaped(testKey)[:60], 401},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			cfg := config.DefaultConfig()
			cfg.OverrideEndpoint(srv.URL+"/v1", "TEST_KEY")
			a, err := New(Options{Config: cfg, Getenv: func(k string) string {
				if k == "TEST_KEY" {
					return testKey
				}
				return ""
			}})
			if err != nil {
				t.Fatal(err)
			}
			_, err = callAttempt(t, a, "hello", callstate.Shape{}, 5*time.Second)
			if err == nil {
				t.Fatal("the upstream's refusal was an answer")
			}
			out, _ := failedOutcome(t, err)
			seen, _ := json.Marshal(out)
			text := err.Error() + "\n" + string(seen)
			for i := 0; i+minKeyPart <= len(testKey); i++ {
				if part := testKey[i : i+minKeyPart]; strings.Contains(text, part) {
					t.Fatalf("%q, part of the key, is in the outcome:\n%s", part, text)
				}
			}
			if !strings.Contains(text, redacted) {
				t.Fatalf("nothing was redacted: the test saw no key\n%s", text)
			}
		})
	}
}

func TestRedactBytes(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"whole", "key " + testKey + " refused", "key [redacted] refused"},
		{"part", "key " + testKey[4:16] + "…", "key [redacted]…"},
		{"too short a part", "sk-live/ is a prefix", "[redacted] is a prefix"},
		{"seven characters", "sk-live", "sk-live"},
		{"escaped", `"` + jsonEscaped(testKey[:10]) + `"`, `"[redacted]"`},
		{"nothing", "all clear", "all clear"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(redactBytes([]byte(tc.in), testKey)); got != tc.want {
				t.Fatalf("redactBytes(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestTransportErrorsLoseTheURLsSecrets: a base URL that carries a key in
// its user or query part (some gateways take it there) is quoted by the
// HTTP client's errors; the attempt's outcome shows it redacted.
func TestTransportErrorsLoseTheURLsSecrets(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	base := strings.Replace(srv.URL, "http://", "http://user-Zq81:pw-Xr72Lm90@", 1) + "/v1?api-key=QUERYKEY-7f3a9c"
	srv.Close() // refused: a transport error
	cfg := config.DefaultConfig()
	cfg.OverrideEndpoint(base, "")
	a, err := New(Options{Config: cfg, Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	_, err = callAttempt(t, a, "hello", callstate.Shape{}, 5*time.Second)
	if err == nil {
		t.Fatal("a closed server answered")
	}
	for _, secret := range []string{"QUERYKEY-7f3a9c", "pw-Xr72Lm90", "user-Zq81"} {
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("the URL's %q is in the attempt's error: %v", secret, err)
		}
	}
}
