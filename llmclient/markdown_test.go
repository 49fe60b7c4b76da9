package llmclient_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.temporal.io/sdk/client"

	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/workflows"
)

// capture is a Temporal client that records the options of the call it
// is asked to start, and starts nothing.
type capture struct {
	client.Client
	opts client.StartWorkflowOptions
}

var errCaptured = errors.New("captured")

func (c *capture) ExecuteWorkflow(_ context.Context, o client.StartWorkflowOptions, _ any, _ ...any) (client.WorkflowRun, error) {
	c.opts = o
	return nil, errCaptured
}

// unescaped reports whether raw occurs in text without a backslash
// before it.
func unescaped(text, raw string) bool {
	for i := 0; ; {
		j := strings.Index(text[i:], raw)
		if j < 0 {
			return false
		}
		if i+j == 0 || text[i+j-1] != '\\' {
			return true
		}
		i += j + 1
	}
}

// TestCallSummaryAndDetailsAreEscaped: the question, user and session of
// a call — text a tenant chooses — reach the Web UI's Markdown as text:
// no link, image, heading or HTML of theirs renders.
func TestCallSummaryAndDetailsAreEscaped(t *testing.T) {
	tc := &capture{}
	c := &llmclient.Client{Temporal: tc}
	_, err := c.Start(context.Background(), workflows.CallRequest{
		UserID: "u-1\n# Urgent: [verify here](https://evil.example)", SessionID: "<img src=x onerror=alert(1)>",
		Scenario: "customer_service", Tenant: "acme",
		Messages: []request.Message{{Role: request.RoleUser, Content: "![logo](https://evil.example/p.png) [reset your password](https://evil.example)"}},
	})
	if !errors.Is(err, errCaptured) {
		t.Fatalf("the call was not started: %v", err)
	}
	for what, text := range map[string]string{"summary": tc.opts.StaticSummary, "details": tc.opts.StaticDetails} {
		for _, raw := range []string{"](", "![", "[reset", "[verify", "\n# ", "<img"} {
			if unescaped(text, raw) {
				t.Errorf("the %s holds the tenant's Markdown %q unescaped: %q", what, raw, text)
			}
		}
	}
	if !strings.Contains(tc.opts.StaticSummary, `\[reset your password\]`) || !strings.Contains(tc.opts.StaticSummary, "customer_service") {
		t.Errorf("the summary lost the question's text: %q", tc.opts.StaticSummary)
	}
	if !strings.Contains(tc.opts.StaticDetails, "**user**") {
		t.Errorf("the details lost their own Markdown: %q", tc.opts.StaticDetails)
	}
}
