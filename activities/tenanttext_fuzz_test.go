package activities

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/durable-llm/durable-llm/policies/callstate"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/request"
)

// echoing answers every request with one response that quotes text: the
// key, a piece of it, the caller's question.
type echoing struct {
	status int
	ctype  string
	body   string
}

func (e echoing) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	return &http.Response{
		StatusCode: e.status, Status: http.StatusText(e.status), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {e.ctype}}, Body: io.NopCloser(strings.NewReader(e.body)),
		ContentLength: int64(len(e.body)), Request: req,
	}, nil
}

// echoes are the ways an upstream quotes text back: %[1]s is the text
// (JSON-escaped where it sits in JSON).
var echoes = []struct {
	status      int
	ctype, body string
}{
	{401, "application/json", `{"error":{"message":"Incorrect API key provided: %[1]s","type":"invalid_request_error","code":"invalid_api_key"}}`},
	{500, "application/json", `{"error":{"message":"worker crashed on %[1]s","type":"%[1]s","code":"%[1]s"}}`},
	{400, "application/json", `{"object":"error","message":"'%[1]s' is not valid","type":"BadRequestError","code":400}`},
	{502, "text/html", `<html><head><title>%[1]s</title></head><body>bad gateway %[1]s</body></html>`},
	{403, "text/plain", `denied: %[1]s`},
	{200, "application/json", `{"id":"x","object":"chat.completion","model":"m","error":{"message":"%[1]s"}}`},
	{200, "application/json", `{"id":"x","object":"chat.completion","model":"m","choices":[]," note":"%[1]s"}`},
	{200, "application/json", `{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"","refusal":"%[1]s"},"finish_reason":"stop"}]}`},
	// A tool call whose arguments, filled from the question, fail the
	// strict tool's pattern: the check's failure quotes nothing.
	{200, "application/json", `{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"lookup","arguments":"{\"q\":\"%[1]s\"}"}}]},"finish_reason":"tool_calls"}]}`},
	{200, "application/json", `{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"%[1]s","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`},
	{200, "application/json", `{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"lookup","arguments":"{\"q\":\"x\",\"%[1]s\":1}"}}]},"finish_reason":"tool_calls"}]}`},
}

// FuzzTenantTextHoldsNoKey feeds the key, pieces of it and questions
// with pieces of it through every failure an upstream can answer with,
// and checks what a tenant reads of the attempt — its reason, the error
// the workflow sees — never holds a piece of the key nor a mask: the
// reason is built from the product's own words, so it has nothing to
// mask and cannot tell a piece of the key from any other text.
func FuzzTenantTextHoldsNoKey(f *testing.F) {
	for i := range echoes {
		f.Add(uint8(i), "Look up "+testKey[:8]+" please", uint8(0), uint8(8))
		f.Add(uint8(i), "notakeyx", uint8(8), uint8(32))
		f.Add(uint8(i), testKey, uint8(3), uint8(11))
	}
	f.Fuzz(func(t *testing.T, which uint8, question string, from, n uint8) {
		lo := int(from) % len(testKey)
		piece := testKey[lo:min(len(testKey), lo+max(int(n), 1))]
		echo := echoes[int(which)%len(echoes)]
		said := question + " " + piece
		quoted, _ := json.Marshal(said)
		text := string(quoted[1 : len(quoted)-1])
		if echo.ctype != "application/json" {
			text = said
		}
		if strings.Contains(echo.body, `\"%[1]s\"`) {
			text = strings.ReplaceAll(strings.ReplaceAll(text, `\`, `\\`), `"`, `\"`)
		}
		up := echoing{status: echo.status, ctype: echo.ctype, body: fmt.Sprintf(echo.body, text)}

		cfg := config.DefaultConfig()
		cfg.OverrideEndpoint("http://10.20.30.40:8000/v1", "TEST_KEY")
		for i := range cfg.Models {
			cfg.Models[i].Stream = false
		}
		a, err := New(Options{Config: cfg, Transport: up, Getenv: func(k string) string {
			if k == "TEST_KEY" {
				return testKey
			}
			return ""
		}})
		if err != nil {
			t.Fatal(err)
		}
		var s testsuite.WorkflowTestSuite
		env := s.NewTestActivityEnvironment()
		env.RegisterActivity(a)
		m := a.cfg.Models[0]
		strict := true
		req := request.Request{
			Messages: []request.Message{{Role: request.RoleUser, Content: question}},
			Tools: []request.Tool{{Type: "function", Function: request.FunctionTool{Name: "lookup", Strict: &strict,
				Parameters: json.RawMessage(`{"type":"object","additionalProperties":false,"required":["q"],"properties":{"q":{"type":"string","pattern":"^x$"}}}`)}}},
		}
		in := CallInput{Request: req, Model: m.Name, Attempt: 1, Shape: callstate.Shape{}, Prompt: a.fitPrompt(req, m, callstate.Shape{}), Timeout: 5 * time.Second}
		_, err = env.ExecuteActivity(a.CallModel, in)
		if err == nil {
			return // an answer: the model's text is the tenant's, unmasked
		}
		out, appErr := failedOutcome(t, err)
		for what, s := range map[string]string{"reason": out.Reason, "error": appErr.Message()} {
			if strings.Contains(s, redacted) {
				t.Fatalf("the %s a tenant reads holds a mask: %q", what, s)
			}
			for i := 0; i+minKeyPart <= len(testKey); i++ {
				if strings.Contains(s, testKey[i:i+minKeyPart]) {
					t.Fatalf("the %s a tenant reads holds %q, a piece of the key: %q", what, testKey[i:i+minKeyPart], s)
				}
			}
			if strings.Contains(question, "notakeyx") && strings.Contains(s, "notakeyx") {
				t.Fatalf("the %s a tenant reads quotes the question: %q", what, s)
			}
			if strings.Contains(s, "10.20.30.40") {
				t.Fatalf("the %s a tenant reads names the upstream's address: %q", what, s)
			}
		}
		// Operators keep what the upstream said, masked.
		if bytes.Contains([]byte(out.Upstream), []byte(testKey)) {
			t.Fatalf("the key is in the operators' text: %q", out.Upstream)
		}
	})
}
