package frontdoor_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/require"

	"github.com/durable-llm/durable-llm/frontdoor"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/testkit/rig"
)

// postFeedback sends body to /v1/calls/{id}/feedback with a tenant's token.
func (d *door) postFeedback(ctx context.Context, token, id, body string) (int, string) {
	d.t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.ts.URL+"/v1/calls/"+id+"/feedback", strings.NewReader(body))
	require.NoError(d.t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(d.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(d.t, err)
	return resp.StatusCode, string(b)
}

func errorCode(t *testing.T, body string) (code, param, message string) {
	t.Helper()
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Param   string `json:"param"`
			Message string `json:"message"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &e), body)
	return e.Error.Code, e.Error.Param, e.Error.Message
}

// TestFeedbackOnOwnCall: a tenant's feedback on its own answered call is
// recorded for the rule that fired (200, with the rule's judgment and
// state); a second one is a duplicate; a bad outcome is a 400 naming it;
// another tenant's call and an unknown one are the same 404; a running
// call is a 409.
func TestFeedbackOnOwnCall(t *testing.T) {
	scenario := "shop-" + uuid.NewString()[:8]
	d := newDoorOn(t, rig.Options{Policy: func(c *config.Config) {
		c.Rules = append([]config.Rule{{ID: "refund", Scenario: scenario, Keywords: []string{"refund"},
			Action: config.RuleSafeMessage, Message: "Refunds are handled on the refunds page."}}, c.Rules...)
	}}, nil)
	ctx := rig.Context(t, 2*time.Minute)
	var hr *http.Response
	_, err := d.openai(tokAcme).Chat.Completions.New(ctx, params("u-fb", "I want a refund"),
		option.WithHeader(frontdoor.HeaderScenario, scenario), option.WithResponseInto(&hr))
	require.NoError(t, err)
	id := hr.Header.Get(frontdoor.HeaderWorkflowID)

	status, body := d.postFeedback(ctx, tokAcme, id, `{"outcome":"delighted"}`)
	require.Equal(t, http.StatusBadRequest, status, body)
	code, param, msg := errorCode(t, body)
	require.Equal(t, "invalid_outcome", code)
	require.Equal(t, "outcome", param)
	require.Contains(t, msg, `unknown outcome "delighted": want one of resolved, abandoned, handoff_requested, complaint`)
	for _, bad := range []string{`{}`, `not json`, `{"outcome":"resolved","extra":1}`} {
		status, body = d.postFeedback(ctx, tokAcme, id, bad)
		require.Equal(t, http.StatusBadRequest, status, "%s: %s", bad, body)
	}

	status, body = d.postFeedback(ctx, tokAcme, id, `{"outcome":"complaint"}`)
	require.Equal(t, http.StatusOK, status, body)
	var fb frontdoor.Feedback
	require.NoError(t, json.Unmarshal([]byte(body), &fb))
	require.Equal(t, frontdoor.Feedback{ID: id, Object: "call.feedback", Outcome: "complaint", Scenario: scenario,
		Rules: []frontdoor.FeedbackRule{{ID: "refund", Fired: true, Judgment: "bad", State: "on"}}}, fb)

	status, body = d.postFeedback(ctx, tokAcme, id, `{"outcome":"resolved"}`)
	require.Equal(t, http.StatusOK, status, body)
	require.NoError(t, json.Unmarshal([]byte(body), &fb))
	require.True(t, fb.Duplicate)
	require.Equal(t, "complaint", fb.Previous)

	status, foreign := d.postFeedback(ctx, tokGlobex, id, `{"outcome":"complaint"}`)
	require.Equal(t, http.StatusNotFound, status, foreign)
	unknownID := "llm-" + strings.Repeat("0", 64)
	status, unknown := d.postFeedback(ctx, tokAcme, unknownID, `{"outcome":"complaint"}`)
	require.Equal(t, http.StatusNotFound, status, unknown)
	require.Equal(t, strings.ReplaceAll(foreign, id, "ID"), strings.ReplaceAll(unknown, unknownID, "ID"), "a foreign call looks unknown")

	// A call no worker takes is still running.
	idle := newDoorOn(t, rig.Options{Client: d.Client}, noWorker(time.Minute))
	_, err = idle.openai(tokAcme).Chat.Completions.New(ctx, params("u-fb-idle", "Answer me later"),
		option.WithHeader("Prefer", "respond-async"), option.WithResponseInto(&hr))
	require.NoError(t, err)
	running := hr.Header.Get(frontdoor.HeaderWorkflowID)
	t.Cleanup(func() { _ = d.Client.TerminateWorkflow(context.Background(), running, "", "test done") })
	status, body = idle.postFeedback(ctx, tokAcme, running, `{"outcome":"resolved"}`)
	require.Equal(t, http.StatusConflict, status, body)
	code, _, msg = errorCode(t, body)
	require.Equal(t, "call_running", code)
	require.Contains(t, msg, "send feedback once it has")
}
