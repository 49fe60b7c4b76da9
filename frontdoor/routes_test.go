package frontdoor_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMethodNotAllowedNamesEveryMethod: a 405 on a route's path names in
// its Allow header (RFC 9110 §15.5.6) and in its message every method the
// route table serves on that path, not only the first one registered, so
// a client reading Allow learns that DELETE /v1/calls/{id} exists. A HEAD
// on a GET route, refused after the route matched, says the same.
func TestMethodNotAllowedNamesEveryMethod(t *testing.T) {
	ts := offline(t, "", nil)
	for _, tc := range []struct {
		method, path, allow string
	}{
		{http.MethodPut, "/v1/calls/c-1", "GET, DELETE"},
		{http.MethodPost, "/v1/calls/c-1", "GET, DELETE"},
		{http.MethodHead, "/v1/calls/c-1", "GET, DELETE"},
		{http.MethodPatch, "/v1/responses/resp_1", "GET, DELETE"},
		{http.MethodPost, "/v1/responses/resp_1", "GET, DELETE"},
		{http.MethodGet, "/v1/responses", "POST"},
		{http.MethodGet, "/v1/responses/resp_1/cancel", "POST"},
		{http.MethodPut, "/v1/chat/completions", "POST"},
		{http.MethodDelete, "/v1/models", "GET"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, ts.URL+tc.path, strings.NewReader(""))
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+tokAcme)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
			require.Equal(t, tc.allow, resp.Header.Get("Allow"))
			if tc.method == http.MethodHead {
				return
			}
			var e struct {
				Error struct{ Code, Message string }
			}
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
			require.Equal(t, "method_not_allowed", e.Error.Code)
			require.Contains(t, e.Error.Message, "(use "+tc.allow+")")
		})
	}
}
