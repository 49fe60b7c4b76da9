package activities

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/policies/callstate"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/guard"
	"github.com/durable-llm/durable-llm/policies/request"
)

func hedging(t *testing.T, after string, budget float64) *Activities {
	t.Helper()
	cfg := config.DefaultConfig()
	cfg.Hedge.After, cfg.Hedge.Model, cfg.Hedge.Budget = after, "llama-8b", budget
	now := time.Unix(1_000_000, 0)
	a, err := New(Options{Config: cfg, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func firstPrepare() PrepareInput {
	req := request.Request{Scenario: "support", Messages: []request.Message{{Role: request.RoleUser, Content: "Where is my order?"}}}
	return PrepareInput{Request: req, State: callstate.New("", callstate.Shape{}, time.Minute, false)}
}

// TestHedgePlanAdaptive: an adaptive hedge waits hedge.initial until the
// first model has 20 first tokens on record, then 1.5 × their p90; only the
// call's first attempt is hedged.
func TestHedgePlanAdaptive(t *testing.T) {
	a := hedging(t, config.HedgeAdaptive, 0.05)
	p, err := a.PrepareAttempt(context.Background(), firstPrepare())
	if err != nil {
		t.Fatal(err)
	}
	if p.Hedge == nil || p.Hedge.Model != "llama-8b" || p.Hedge.After != 2*time.Second || !strings.HasPrefix(p.Hedge.Basis, "initial") {
		t.Fatalf("plan with no first tokens on record: %+v", p.Hedge)
	}
	for i := 1; i <= 100; i++ {
		a.firstToken("qwen-72b", time.Duration(i)*10*time.Millisecond) // 10 ms … 1 s
	}
	p, _ = a.PrepareAttempt(context.Background(), firstPrepare())
	if p.Hedge == nil || p.Hedge.After != 1350*time.Millisecond || p.Hedge.Basis != "1.5 × p90 900 ms of 100 first tokens of qwen-72b on this worker" {
		t.Fatalf("plan with 100 first tokens: %+v", p.Hedge)
	}
	second := firstPrepare()
	second.State = p.State // one request made
	if p2, _ := a.PrepareAttempt(context.Background(), second); p2.Hedge == nil || !p2.Hedge.Overdue {
		t.Errorf("a later attempt is hedged by the policy: %+v (want only its overdue plan)", p2.Hedge)
	}
}

// TestHedgePlanFromThisWorker: the adaptive delay is 1.5 × this worker's
// p90 time to first token once enough are on record, even in a fleet
// (each worker measures its own; the fleet shares breakers and holds).
func TestHedgePlanFromThisWorker(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	cfg := config.DefaultConfig()
	cfg.Hedge.After, cfg.Hedge.Model, cfg.Hedge.Budget = config.HedgeAdaptive, "llama-8b", 0.05
	sync := guard.NewSync("w1", 5*time.Second)
	a, err := New(Options{Config: cfg, Now: func() time.Time { return now }, Sync: sync})
	if err != nil {
		t.Fatal(err)
	}
	for range 30 {
		a.firstToken("qwen-72b", 400*time.Millisecond)
	}
	sync.SetView(guard.View{Workers: 3}, now)
	p, _ := a.PrepareAttempt(context.Background(), firstPrepare())
	if p.Hedge == nil || p.Hedge.After != 600*time.Millisecond || p.Hedge.Basis != "1.5 × p90 400 ms of 30 first tokens of qwen-72b on this worker" {
		t.Fatalf("plan: %+v", p.Hedge)
	}
}

// TestHedgePlanNotForItself: a call whose first model is the hedge model
// is not hedged, nor one whose request needs what the hedge model lacks.
func TestHedgePlanNotForItself(t *testing.T) {
	a := hedging(t, "1s", 0.05)
	in := firstPrepare()
	in.State = callstate.New("llama-8b", callstate.Shape{}, time.Minute, false)
	// Not by the policy's hedge: at most by a hedge where one could answer
	// sooner once the first token is overdue.
	if p, _ := a.PrepareAttempt(context.Background(), in); p.Model != "llama-8b" || p.Hedge == nil || !p.Hedge.Overdue {
		t.Errorf("first model llama-8b: model %s, hedge %+v", p.Model, p.Hedge)
	}
	in = firstPrepare()
	in.Request.Tools = []request.Tool{{Type: "function", Function: request.FunctionTool{Name: "lookup_order"}}}
	if p, _ := a.PrepareAttempt(context.Background(), in); p.Hedge == nil || !p.Hedge.Overdue {
		t.Errorf("a tool request is hedged by llama-8b, which has no tools: %+v", p.Hedge)
	}
}

// TestStartHedge: the hedge is one more request of the call on the hedge
// model alone; the hedge budget allows one per window beyond its ratio,
// and a hedge model whose breaker is open is refused, not replaced by the
// next rung.
func TestStartHedge(t *testing.T) {
	a := hedging(t, "1s", 0.0001) // one hedge a window, the floor
	p, _ := a.PrepareAttempt(context.Background(), firstPrepare())
	in := HedgeInput{Prepare: PrepareInput{Request: firstPrepare().Request, State: p.State}, Model: "llama-8b"}
	h, err := a.StartHedge(context.Background(), in)
	if err != nil || h.Model != "llama-8b" || h.State.Requests != 2 {
		t.Fatalf("first hedge: %+v, %v", h, err)
	}
	h, _ = a.StartHedge(context.Background(), in)
	if h.Model != "" || !strings.Contains(h.Reason, "hedge budget spent") {
		t.Errorf("second hedge with a tiny budget: %+v", h)
	}

	a = hedging(t, "1s", 1)
	a.breakers.Trip("llama-8b", a.now())
	h, _ = a.StartHedge(context.Background(), in)
	if h.Model != "" || !strings.Contains(h.Reason, "breaker") {
		t.Errorf("hedge on an open breaker: %+v", h)
	}
}
