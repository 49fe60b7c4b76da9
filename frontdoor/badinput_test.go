package frontdoor_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/durable-llm/durable-llm/testkit/rig"
)

// badRequest is a request the front door must refuse before any call
// starts, and what it must answer.
type badRequest struct {
	name    string
	path    string // default /v1/chat/completions
	headers map[string]string
	body    string
	status  int
	code    string
	param   string
	says    string
}

// question is a valid chat body with one user message.
const question = `{"model":"auto","messages":[{"role":"user","content":"Where is my order?"}]}`

// refuse sends each request to ts (a front door without Temporal: whatever
// it answers, it answers before a call starts) and checks the refusal is
// OpenAI's error shape with the status, code, param and message wanted.
func refuse(t *testing.T, ts *httptest.Server, cases []badRequest) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.path
			if path == "" {
				path = "/v1/chat/completions"
			}
			req, err := http.NewRequestWithContext(rig.Context(t, 2*time.Minute), http.MethodPost, ts.URL+path, strings.NewReader(tc.body))
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+tokAcme)
			req.Header.Set("Content-Type", "application/json")
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			resp, err := ts.Client().Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			data, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.Equal(t, tc.status, resp.StatusCode, "%s", data)
			require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			var e struct {
				Error struct {
					Message string  `json:"message"`
					Type    string  `json:"type"`
					Param   *string `json:"param"`
					Code    *string `json:"code"`
				} `json:"error"`
			}
			require.NoError(t, json.Unmarshal(data, &e), "%s", data)
			require.Equal(t, "invalid_request_error", e.Error.Type)
			require.NotNil(t, e.Error.Code)
			require.Equal(t, tc.code, *e.Error.Code)
			param := ""
			if e.Error.Param != nil {
				param = *e.Error.Param
			}
			require.Equal(t, tc.param, param)
			require.Contains(t, e.Error.Message, tc.says)
		})
	}
}

// TestBadInputIsRefusedByName: the refusals of issue 30's smaller
// findings, each in OpenAI's error shape naming what is wrong.
func TestBadInputIsRefusedByName(t *testing.T) {
	ts := offline(t, "", nil)
	withMessages := func(msgs string) string { return `{"model":"auto","messages":[` + msgs + `]}` }
	refuse(t, ts, []badRequest{
		// 10^13 ms overflowed a time.Duration and was "below the minimum".
		{name: "a deadline too large for a Duration", headers: map[string]string{"X-Deadline-Ms": "10000000000000"}, body: question,
			status: 400, code: "invalid_value", param: "X-Deadline-Ms", says: "10000000000000 ms is over the limit of 600000 ms"},
		{name: "a deadline too large for int64", headers: map[string]string{"X-Deadline-Ms": "99999999999999999999"}, body: question,
			status: 400, code: "invalid_value", param: "X-Deadline-Ms", says: "over the limit of 600000 ms"},
		// Invalid UTF-8 was replaced by U+FFFD without a word.
		{name: "a body that is not UTF-8", body: withMessages("{\"role\":\"user\",\"content\":\"caf\xe9?\"}"),
			status: 400, code: "invalid_json", says: "not valid UTF-8"},
		{name: "a lone surrogate escape", body: withMessages(`{"role":"user","content":"\ud83d?"}`),
			status: 400, code: "invalid_json", says: "half a UTF-16 surrogate pair"},
		// Unknown fields inside messages were dropped.
		{name: "an unknown field in a message", body: withMessages(`{"role":"user","content":"Hi","reasoning_content":"x"}`),
			status: 400, code: "invalid_value", param: "messages[0].reasoning_content", says: "unknown field"},
		{name: "an unknown field in a content part", body: withMessages(`{"role":"user","content":[{"type":"text","text":"Hi","cache_control":{"type":"ephemeral"}}]}`),
			status: 400, code: "invalid_value", param: "messages[0].content[0].cache_control", says: "unknown field"},
		// An unknown scenario was accepted, its rules skipped.
		{name: "an unknown scenario", headers: map[string]string{"X-Scenario": "medcal"}, body: question,
			status: 400, code: "invalid_value", param: "X-Scenario", says: `X-Scenario header: unknown scenario "medcal" (known: customer_service, medical, finance, education;`},
		// Image URLs into the network were forwarded.
		{name: "an image URL to cloud metadata", body: withMessages(`{"role":"user","content":[{"type":"text","text":"What is this?"},{"type":"image_url","image_url":{"url":"http://169.254.169.254/latest/meta-data/"}}]}`),
			status: 400, code: "invalid_value", param: "messages[0].content[1].image_url.url", says: "a link-local address"},
		{name: "an image URL to loopback in decimal", body: withMessages(`{"role":"user","content":[{"type":"image_url","image_url":{"url":"http://2130706433:8000/x.png"}}]}`),
			status: 400, code: "invalid_value", param: "messages[0].content[0].image_url.url", says: "a loopback address"},
		{name: "an image URL with credentials", body: withMessages(`{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://u:p@images.example.com/x.png"}}]}`),
			status: 400, code: "invalid_value", param: "messages[0].content[0].image_url.url", says: "credentials"},
		// An oversized feedback was a 400 unreadable_body.
		{name: "an oversized feedback", path: "/v1/calls/llm-" + strings.Repeat("0", 64) + "/feedback",
			body: `{"outcome":"` + strings.Repeat("x", 5000) + `"}`, status: 413, code: "request_too_large", says: "over the limit of 4096 bytes"},
	})
}
