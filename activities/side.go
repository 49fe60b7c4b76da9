package activities

import (
	"context"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"go.temporal.io/sdk/activity"

	"github.com/durable-llm/durable-llm/policies/classify"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/guard"
)

// sideRequest sends req to model m for the call itself, beside its
// attempts (a split question, a context summary): on the key of m with the
// most headroom, unless every key is parked, the model's breaker is open
// (a half-open breaker's probes are left to the calls) or the endpoint's
// retry budget, within tenant's share, is spent. The request is an extra
// one: a retry in that budget. It is bounded by timeout, heartbeats while
// it runs when the activity has a heartbeat timeout, and goes out as
// <workflow id>/<suffix>. When no answer came, why says what stopped it
// (the error redacted); m is the model with the key it used.
func (a *Activities) sideRequest(ctx context.Context, m config.ModelConfig, tenant, suffix string, timeout time.Duration,
	req openai.ChatCompletionRequest) (resp openai.ChatCompletionResponse, used config.ModelConfig, why string) {
	now := a.now()
	key, ok := a.pickKey(m, now)
	switch {
	case !ok:
		return resp, m, "every key of " + m.Name + " is parked"
	case a.breakers.State(m.Name, now) == guard.BreakerOpen:
		return resp, m, "the breaker of " + m.Name + " is open"
	}
	m = m.WithKey(key)
	if ok, _ := a.budgets.For(m.Capacity()).TryRetryFor(now, tenant); !ok {
		return resp, m, "the retry budget of " + m.EndpointLabel() + " is spent"
	}
	req.Model = m.Name
	info := activity.GetInfo(ctx)
	cctx, cancel := context.WithTimeout(withExchange(ctx, &exchange{requestID: info.WorkflowExecution.ID + "/" + suffix}), timeout)
	defer cancel()
	stop := heartbeat(ctx, info.HeartbeatTimeout, func() any { return suffix })
	resp, err := a.client(m).create(cctx, req)
	stop()
	if err != nil {
		// Tenants read the reason: the product's words for what failed;
		// the error's text (an address, the upstream's words) is logged.
		activity.GetLogger(ctx).Warn("side request failed", "model", m.Name, "error", redactString(oneLine(err.Error()), a.apiKey(m)))
		return resp, m, m.Name + ": " + classify.Classify(classify.Observation{Err: err, Now: a.now()}).Reason
	}
	return resp, m, ""
}
