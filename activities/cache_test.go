package activities

import (
	"context"
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
	c := newAnswerCache(cfg, nil)
	now := time.Unix(1_000_000, 0)
	put, get := cacheOps(t, c)

	put(ask("acme", "How long does shipping take?"), "3 days", "qwen-72b", now)
	if got, ok := get(ask("acme", "how long does SHIPPING take"), now.Add(time.Minute)); !ok || got.content != "3 days" || got.model != "qwen-72b" {
		t.Fatalf("same question asked another way: %+v, %v", got, ok)
	}
	if _, ok := get(ask("globex", "How long does shipping take?"), now); ok {
		t.Error("another tenant got the answer")
	}
	other := ask("acme", "How long does shipping take?")
	other.Messages[0].Content = "You are a pirate."
	if _, ok := get(other, now); ok {
		t.Error("a request with other instructions got the answer")
	}
	if _, ok := get(ask("acme", "How long does shipping take?"), now.Add(2*time.Hour)); ok {
		t.Error("served after its TTL")
	}

	put(ask("acme", "What is your return policy?"), "30 days", "qwen-72b", now)
	put(ask("acme", "Do you ship to Canada?"), "yes", "qwen-72b", now)
	put(ask("acme", "Can I pay by card?"), "yes", "qwen-72b", now)
	if _, ok := get(ask("acme", "What is your return policy?"), now); ok {
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

// cacheOps are c's put and get that fail the test on a store error.
func cacheOps(t *testing.T, c *answerCache) (func(request.Request, string, string, time.Time), func(request.Request, time.Time) (cachedAnswer, bool)) {
	ctx := context.Background()
	return func(req request.Request, content, model string, at time.Time) {
			t.Helper()
			if err := c.put(ctx, req, content, model, at); err != nil {
				t.Fatal(err)
			}
		}, func(req request.Request, at time.Time) (cachedAnswer, bool) {
			t.Helper()
			a, ok, err := c.get(ctx, req, at)
			if err != nil {
				t.Fatal(err)
			}
			return a, ok
		}
}
