package frontdoor

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/workflows"
)

// FuzzDecodeRequest feeds arbitrary bodies to the decoders of both APIs
// (chat completions and responses) and checks what the front door relies
// on, beyond not panicking:
//   - a refusal names its field unless the body is not a JSON object, and
//     the field is one the body has (or a required one it lacks);
//   - an accepted body is a JSON object whose every top-level field the
//     API reads, ignores or passes through, and its messages are all there;
//   - the CallRequest made from it survives the trip into workflow input
//     (JSON out and back) unchanged;
//   - Validate judges it without panicking, naming a field for every
//     problem.
//
// The seed corpus is in testdata/fuzz/FuzzDecodeRequest; plain go test
// runs it.
func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(`{"model":"auto","messages":[{"role":"user","content":"Hi"}]}`))
	f.Add([]byte(`{"input":"Hi","instructions":"Be brief."}`))
	cfg := config.DefaultConfig()
	passthrough := map[string]bool{"top_k": true, "repetition_penalty": true}
	apis := []struct {
		name string
		api  api
		fs   fieldSet
	}{
		{"chat", chatAPI{}, fieldSet{handledFields, IgnoredFields, unsupported}},
		{"responses", responsesAPI{}, fieldSet{responsesHandled, responsesIgnored, responsesUnsupported}},
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var top map[string]json.RawMessage
		isObject := json.Unmarshal(body, &top) == nil && top != nil
		for _, a := range apis {
			cr, ferr := a.api.decode(body, passthrough)
			if ferr != nil {
				checkRefusal(t, a.name, body, top, isObject, ferr)
				continue
			}
			if !isObject {
				t.Fatalf("%s: accepted a body that is not a JSON object: %q", a.name, body)
			}
			for name := range top {
				known := passthrough[name] || slices.Contains(a.fs.handled, name) || slices.Contains(a.fs.ignored, name)
				if !known {
					t.Fatalf("%s: accepted unknown field %q (it would be dropped)", a.name, name)
				}
			}
			if a.name == "chat" {
				var msgs []json.RawMessage
				if err := json.Unmarshal(top["messages"], &msgs); err != nil || len(msgs) != len(cr.Messages) {
					t.Fatalf("chat: %d message(s) decoded from %s", len(cr.Messages), top["messages"])
				}
			}
			checkCallRequest(t, a.name, cr, cfg)
		}
	})
}

// checkRefusal checks that a refused body's error says what is wrong and
// where.
func checkRefusal(t *testing.T, api string, body []byte, top map[string]json.RawMessage, isObject bool, ferr *fieldError) {
	t.Helper()
	if strings.TrimSpace(ferr.problem) == "" {
		t.Fatalf("%s: refusal without a problem (field %q) for %q", api, ferr.field, body)
	}
	if ferr.field == "" {
		if isObject {
			t.Fatalf("%s: refusal of a JSON object names no field: %q for %q", api, ferr.problem, body)
		}
		return
	}
	if !isObject {
		t.Fatalf("%s: a body that is not a JSON object refused as field %q: %q", api, ferr.field, ferr.problem)
	}
	if _, ok := top[ferr.field]; ok {
		return // a top-level field, named as written (dots and all)
	}
	root := ferr.field
	if i := strings.IndexAny(root, ".["); i >= 0 {
		root = root[:i]
	}
	if root == `""` {
		root = "" // a field with an empty name, named as written
	}
	if _, ok := top[root]; !ok && !strings.Contains(ferr.problem, "missing") {
		t.Fatalf("%s: refusal names field %q, which the body does not have: %q", api, ferr.field, ferr.problem)
	}
}

// checkCallRequest builds the CallRequest the handler would start and
// checks that it reaches the workflow as it is, and that Validate names a
// field for each of its problems.
func checkCallRequest(t *testing.T, api string, cr chatRequest, cfg *config.Config) {
	t.Helper()
	req := cr.Agent
	req.Model, req.Messages, req.MaxTokens, req.Temperature = cr.Model, cr.Messages, cr.MaxTokens, cr.Temperature
	first, err := json.Marshal(workflows.CallRequest(req))
	if err != nil {
		t.Fatalf("%s: an accepted request cannot be workflow input: %v", api, err)
	}
	var back workflows.CallRequest
	if err := json.Unmarshal(first, &back); err != nil {
		t.Fatalf("%s: workflow input %s does not decode: %v", api, first, err)
	}
	second, err := json.Marshal(back)
	if err != nil {
		t.Fatalf("%s: re-encoding: %v", api, err)
	}
	if !bytes.Equal(first, second) {
		t.Fatalf("%s: the request changed on its way into the workflow:\n%s\n%s", api, first, second)
	}
	verr := request.Validate(req, cfg)
	if verr == nil {
		return
	}
	var ve *request.ValidationError
	if !errors.As(verr, &ve) || len(ve.Problems) == 0 {
		t.Fatalf("%s: Validate refused without naming a field: %v", api, verr)
	}
	for _, p := range ve.Problems {
		if p.Field == "" || p.Problem == "" {
			t.Fatalf("%s: Validate problem without a field or a problem: %+v", api, p)
		}
	}
	if e := validationError(verr, cr); e.param == "" || e.status != 400 {
		t.Fatalf("%s: the 400 for %v names no param (status %d)", api, verr, e.status)
	}
}
