package codec

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestLoginCookieExpiresOnTheServer: a login cookie is good for
// cookieLife by the server's clock, whatever the browser keeps; its
// instant cannot be moved without the token (the MAC covers it), and a
// cookie of another token is refused.
func TestLoginCookieExpiresOnTheServer(t *testing.T) {
	token := strings.Repeat("s3cr3t-", 6)
	now := time.Now()
	with := func(v string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/decode", nil)
		r.AddCookie(&http.Cookie{Name: CookieName, Value: v})
		return r
	}
	fresh := cookieValue(token, now.Add(-time.Hour))
	if !cookieOK(with(fresh), token, now) {
		t.Fatal("an hour-old cookie was refused")
	}
	if old := cookieValue(token, now.Add(-13*time.Hour)); cookieOK(with(old), token, now) {
		t.Error("a 13-hour-old cookie was accepted: only the browser enforced its life")
	}
	_, mac, _ := strings.Cut(fresh, ".")
	// Moved to now, well within the cookie's life: only its MAC refuses it.
	moved := strconv.FormatInt(now.Unix(), 10) + "." + mac
	if cookieOK(with(moved), token, now) {
		t.Error("a cookie whose instant was moved was accepted")
	}
	if cookieOK(with(cookieValue(strings.Repeat("other-", 7), now)), token, now) {
		t.Error("another token's cookie was accepted")
	}
}
