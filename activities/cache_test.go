package activities

import (
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
	"github.com/durable-llm/durable-llm/policies/request"
)

func ask(tenant, q string) request.Request {
	return request.Request{Tenant: tenant, Scenario: "support", Messages: []request.Message{
		{Role: request.RoleSystem, Content: "You are a support agent."}, {Role: request.RoleUser, Content: q}}}
}

// TestAnswerCache: answers are kept per tenant by normalised question, for
// the TTL, the least recently used dropped beyond max_entries; private
// text, earlier turns and tool requests are never kept.
func TestAnswerCache(t *testing.T) {
	cfg := config.DefaultConfig().Cache
	cfg.MaxEntries, cfg.TTL = 2, config.Duration(time.Hour)
	c := newAnswerCache(cfg)
	now := time.Unix(1_000_000, 0)

	c.put(ask("acme", "How long does shipping take?"), "3 days", "qwen-72b", now)
	if got, ok := c.get(ask("acme", "how long does SHIPPING take"), now.Add(time.Minute)); !ok || got.content != "3 days" || got.model != "qwen-72b" {
		t.Fatalf("same question asked another way: %+v, %v", got, ok)
	}
	if _, ok := c.get(ask("globex", "How long does shipping take?"), now); ok {
		t.Error("another tenant got the answer")
	}
	other := ask("acme", "How long does shipping take?")
	other.Messages[0].Content = "You are a pirate."
	if _, ok := c.get(other, now); ok {
		t.Error("a request with other instructions got the answer")
	}
	if _, ok := c.get(ask("acme", "How long does shipping take?"), now.Add(2*time.Hour)); ok {
		t.Error("served after its TTL")
	}

	c.put(ask("acme", "What is your return policy?"), "30 days", "qwen-72b", now)
	c.put(ask("acme", "Do you ship to Canada?"), "yes", "qwen-72b", now)
	c.put(ask("acme", "Can I pay by card?"), "yes", "qwen-72b", now)
	if _, ok := c.get(ask("acme", "What is your return policy?"), now); ok {
		t.Error("more answers kept than max_entries")
	}

	for _, req := range []request.Request{
		ask("acme", "Where is order 12345678?"),
		ask("acme", "Mail me at jane.doe@example.com"),
		ask("acme", "Call me on +1 (555) 123-4567"),
		{Tenant: "acme", Messages: []request.Message{{Role: request.RoleUser, Content: "Hi"}, {Role: request.RoleAssistant, Content: "Hello"}, {Role: request.RoleUser, Content: "Shipping?"}}},
		{Tenant: "acme", Messages: []request.Message{{Role: request.RoleUser, Content: "Shipping?"}}, Tools: []request.Tool{{Type: "function", Function: request.FunctionTool{Name: "f"}}}},
		{Tenant: "acme", Messages: []request.Message{{Role: request.RoleSystem, Content: "The user is Jane, account 12345678."}, {Role: request.RoleUser, Content: "Shipping?"}}},
	} {
		if k, ok := c.key(req); ok {
			t.Errorf("kept %q", k)
		}
	}

	if !cacheServes(cfg, []failure.Class{failure.ServiceUnavailable}, nil) || !cacheServes(cfg, nil, []string{"budget"}) {
		t.Error("the cache does not answer during maintenance or with the budget spent")
	}
	if cacheServes(cfg, []failure.Class{failure.ContentFilter}, []string{"hold"}) {
		t.Error("the cache answers a call refused for its content")
	}
}
