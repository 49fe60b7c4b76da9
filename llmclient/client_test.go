package llmclient

import (
	"strings"
	"testing"

	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/workflows"
)

// TestSummary: the Web UI's summary of a call is its scenario, the first
// words of its last question and its tenant, each only when there is one.
func TestSummary(t *testing.T) {
	ask := func(tenant, scenario string, msgs ...request.Message) workflows.CallRequest {
		return workflows.CallRequest{Tenant: tenant, Scenario: scenario, Messages: msgs}
	}
	user := func(s string) request.Message { return request.Message{Role: request.RoleUser, Content: s} }
	long := strings.Repeat("where is it ", 10)
	for _, c := range []struct {
		req  workflows.CallRequest
		want string
	}{
		{ask("acme", "customer_service", request.Message{Role: request.RoleSystem, Content: "You help."}, user("Where is my order\n 1234?")),
			"customer_service · “Where is my order 1234?” · acme"},
		{ask("", "", user("hi"), request.Message{Role: request.RoleAssistant, Content: "hello"}, user("我的订单到哪了？")),
			"“我的订单到哪了？”"},
		{ask("globex", "", user(long)), "“" + strings.TrimSpace(long)[:60] + "…” · globex"},
		{ask("", "support", request.Message{Role: request.RoleSystem, Content: "sys"}), "support · 1 message(s), no user question"},
	} {
		if got := Summary(c.req); got != c.want {
			t.Errorf("Summary = %q, want %q", got, c.want)
		}
	}
}
