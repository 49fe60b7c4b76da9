package uicheck_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/policies/callstate"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/testkit/rig"
	"github.com/durable-llm/durable-llm/testkit/testenv"
	"github.com/durable-llm/durable-llm/testkit/uicheck"
	"github.com/durable-llm/durable-llm/workflows"
)

var update = flag.Bool("update", false, "write the screenshot to docs/ui-attempts.png (the README's)")

// screenshotFile is the README's screenshot, relative to this package.
const screenshotFile = "../../docs/ui-attempts.png"

// uiScenario makes a call retry, switch model twice, wait out a hold and
// fall back: qwen-72b answers 500 (retry, then switch), qwen-14b reports a
// full queue (the next model at once), llama-8b too (the last model: one
// hold and resend, under uiStack's queue_full max of 1), and the FAQ
// answers.
const uiScenario = `name: ui-check
phases:
  - name: fault
    faults:
      - {kind: server_error, model: qwen-72b}
      - {kind: queue_full, model: qwen-14b}
      - {kind: queue_full, model: llama-8b}
`

// TestWebUIShowsEveryAttemptWaitAndDecision runs a call that retries,
// switches model and falls back, then opens its page in the Temporal Web UI
// in headless Chromium and checks that an operator sees every attempt,
// every wait and every decision, each with its summary.
func TestWebUIShowsEveryAttemptWaitAndDecision(t *testing.T) {
	sc, err := llmsim.ParseScenario([]byte(uiScenario), "ui-check")
	require.NoError(t, err)
	chromium, lc, cfg := uiStack(t, sc)
	req := workflows.CallRequest{
		UserID: "u-" + uuid.NewString()[:8], SessionID: "s-1", Scenario: "customer_service",
		Messages: []request.Message{
			{Role: "system", Content: "You are a support agent."},
			{Role: "user", Content: "How do I get a refund for my order?"},
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := lc.Call(ctx, req)
	require.NoError(t, err)

	// What the call did, before looking at how the UI shows it.
	var decisions []string
	for _, a := range res.Attempts {
		decisions = append(decisions, a.Model+":"+a.Class+":"+a.Decision)
	}
	require.Equal(t, []string{
		"qwen-72b:server_error:retry",
		"qwen-72b:server_error:switch_model",
		"qwen-14b:queue_full:switch_model",
		"llama-8b:queue_full:hold+resend",
		"llama-8b:queue_full:fallback",
	}, decisions)
	require.Equal(t, workflows.SourceFAQ, res.Source)
	require.Equal(t, "refund-en", res.FAQID)

	// The summaries the workflow gave each attempt, timer and decision.
	var attempts, waits, plans []string
	refused := 0 // backpressure: refusals are no attempts against the cap
	for i, a := range res.Attempts {
		n := fmt.Sprintf("attempt %d/%d", i+1, cfg.Call.MaxAttempts)
		if refused > 0 {
			n = fmt.Sprintf("attempt %d/%d (request %d)", i+1-refused, cfg.Call.MaxAttempts, i+1)
		}
		if a.Class == string(failure.QueueFull) {
			refused++
		}
		attempts = append(attempts, fmt.Sprintf("%s · %s · %d→%d msgs", n, a.Model, len(req.Messages), a.Messages))
		plans = append(plans, fmt.Sprintf("decide after %s on %s", a.Class, a.Model))
		if a.DelayMS == 0 {
			continue
		}
		d := callstate.FormatDuration(time.Duration(a.DelayMS) * time.Millisecond)
		switch a.Decision {
		case "retry":
			waits = append(waits, fmt.Sprintf("backoff %s after %s", d, a.Class))
		case "switch_model":
			waits = append(waits, fmt.Sprintf("wait %s after %s, then %s", d, a.Class, res.Attempts[i+1].Model))
		case "hold+resend":
			waits = append(waits, fmt.Sprintf("hold %s after %s, then resend", d, a.Class))
		}
	}
	// The hold before resending is always a wait; the backoff after the
	// first 502 is full jitter, whose draw may round to 0 ms (no timer).
	require.Contains(t, waits, fmt.Sprintf("hold %s after %s, then resend",
		callstate.FormatDuration(time.Duration(res.Attempts[3].DelayMS)*time.Millisecond), failure.QueueFull), "the call held before resending")
	require.LessOrEqual(t, len(waits), 2, "a backoff and a hold at most: %v", waits)
	fallback := "fallback: cache → FAQ → rule card → placeholder"

	b, err := uicheck.Start(uicheck.Options{Path: chromium})
	require.NoError(t, err)
	t.Cleanup(b.Close)
	page := lc.UILink(res.RequestID)
	require.NoError(t, b.Open(page))

	// The timeline draws each activity with its summary and each timer.
	timeline := "#event-history-timeline-graph"
	_, err = b.WaitText(timeline, 90*time.Second, append(append([]string{"Fallback"}, attempts...), waits...)...)
	require.NoError(t, err, "the event history timeline of %s", page)

	// Oldest event first, one row per activity and timer: the view an
	// operator reads the story of a call in.
	if ok, err := b.ClickText("Descending"); err != nil || !ok {
		t.Logf("no Descending toggle found (found=%v, err=%v): keeping the UI's order", ok, err)
	}
	if ok, err := b.ClickText("Compact"); err != nil || !ok {
		t.Logf("no Compact view toggle found (found=%v, err=%v): checking the full event list", ok, err)
	}
	want := append(append(append(append([]string{"admit: validate, business rules"}, attempts...), waits...), plans...), fallback)
	table, err := b.WaitText("table", 60*time.Second, want...)
	require.NoError(t, err, "the event table of %s", page)
	require.Contains(t, table, "Timer", "the waits are timers in the event table")

	png, err := b.Screenshot()
	require.NoError(t, err)
	keepScreenshot(t, png, page, screenshotFile)
}

// listScreenshotFile is the README's picture of the call list.
const listScreenshotFile = "../../docs/ui-calls.png"

// listColumns are the columns README tells operators to add to the
// workflow list (Configure columns in the Web UI; the UI keeps them in
// the browser's local storage, which this test writes the way it does).
var listColumns = []string{"LlmScenario", "LlmTenant", "LlmOutcome", "LlmSource", "LlmModel", "LlmClasses"}

// TestWebUIListsCallsByOutcome runs three calls that end differently
// (answered by the first model, by another after a switch, handed off)
// for two tenants, adds
// the LLM columns to the Web UI's workflow list in headless Chromium, and
// checks that an operator tells the rows apart without opening them.
func TestWebUIListsCallsByOutcome(t *testing.T) {
	chromium, lc, _ := uiStack(t, &llmsim.Scenario{Name: "list", Models: llmsim.InstantModels()})
	uiBase, tq := lc.UIBase, lc.TaskQueue

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ask := func(tenant, scenario, q string) workflows.CallResult {
		res, err := lc.Call(ctx, workflows.CallRequest{Tenant: tenant, UserID: "u-" + uuid.NewString()[:6], Scenario: scenario,
			Messages: []request.Message{{Role: "user", Content: q}}})
		require.NoError(t, err)
		return res
	}
	calls := map[string]workflows.CallResult{
		"model":    ask("acme", "customer_service", "Where is my order 1234?"),
		"switched": ask("globex", "customer_service", "[[sim fault=server_error times=2]] Can I change my delivery address?"),
		"handoff":  ask("acme", "medical", "I have chest pain and my left arm is numb"),
	}
	require.Equal(t, workflows.SourceModel, calls["model"].Source)
	require.Equal(t, workflows.SourceFallbackModel, calls["switched"].Source)
	require.Equal(t, workflows.SourceHandoff, calls["handoff"].Source)

	b, err := uicheck.Start(uicheck.Options{Path: chromium, Width: 1700, Height: 430})
	require.NoError(t, err)
	t.Cleanup(b.Close)
	require.NoError(t, b.Open(uiBase+"/namespaces/default/workflows"))
	setColumns(t, b, listColumns)

	list := uiBase + "/namespaces/default/workflows?query=" + url.QueryEscape(`WorkflowType="LLMCall" AND TaskQueue="`+tq+`"`)
	require.NoError(t, b.Open(list))
	table, err := b.WaitText("table", 90*time.Second, append(append([]string{}, listColumns...),
		"answered", "handoff", "fallback_model", "server_error", "qwen-14b", "qwen-72b", "medical", "globex")...)
	require.NoError(t, err, "the workflow list %s", list)
	require.NotContains(t, table, "llm-guard", "the query shows LLM calls only")
	foldSavedViews(t, b)
	for _, res := range calls {
		require.Contains(t, table, res.RequestID[:20], "a call is missing from the list")
	}

	png, err := b.ViewportScreenshot()
	require.NoError(t, err)
	keepScreenshot(t, png, list, listScreenshotFile)
}

// setColumns makes the Web UI's workflow list show Status, Workflow ID and
// cols (Configure columns: the UI keeps them in the browser's local
// storage, which this writes the way it does).
func setColumns(t *testing.T, b *uicheck.Browser, cols []string) {
	t.Helper()
	all := []map[string]any{{"label": "Status", "pinned": true}, {"label": "Workflow ID", "pinned": true}}
	for _, c := range cols {
		all = append(all, map[string]any{"label": c, "pinned": false})
	}
	setting, err := json.Marshal(map[string]any{"default": all})
	require.NoError(t, err)
	require.NoError(t, b.Eval(fmt.Sprintf("localStorage.setItem('namespace-workflow-table-columns', %q)", setting), nil))
}

// keepScreenshot keeps a screenshot of page in the test's artifacts and,
// with -update, as the README's file.
func keepScreenshot(t *testing.T, png []byte, page, file string) {
	t.Helper()
	require.Greater(t, len(png), 10_000, "the screenshot is suspiciously small")
	shot := filepath.Join(t.ArtifactDir(), filepath.Base(file))
	require.NoError(t, os.WriteFile(shot, png, 0o644))
	t.Logf("screenshot of %s: %s", page, shot)
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(file), 0o755))
		require.NoError(t, os.WriteFile(file, png, 0o644))
		t.Logf("wrote %s", file)
	}
}

// foldSavedViews folds the list's saved-views panel so the picture has
// room for the columns.
func foldSavedViews(t *testing.T, b *uicheck.Browser) {
	t.Helper()
	var folded bool
	require.NoError(t, b.Eval(`(() => {
	  const h = [...document.querySelectorAll('*')].find(e => e.children.length > 0 && e.textContent.trim().startsWith('Saved Views') && e.querySelector('button'));
	  const btn = h && h.querySelector('button');
	  if (btn) { btn.click(); return true; }
	  return false;
	})()`, &folded))
	if !folded {
		t.Log("no saved-views panel to fold: the picture keeps it")
	}
	time.Sleep(500 * time.Millisecond)
}

// uiStack starts what a Web UI check needs — a dev server with its Web UI,
// llmsim playing sc, a worker on a task queue of its own — and returns
// the Chromium to drive, a client whose UIBase is the UI, and the policy;
// it skips the test in -short mode or without Chromium.
func uiStack(t *testing.T, sc *llmsim.Scenario) (string, *llmclient.Client, *config.Config) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs the Temporal dev server and Chromium (skipped in -short mode)")
	}
	chromium := uicheck.Chromium()
	if chromium == "" {
		t.Skip("Chromium is not installed (apt-get install chromium, or set CHROMIUM): the Web UI check needs a real browser")
	}
	uiPort := testenv.FreePort(t)
	srv := testenv.Server(t, workflows.SearchAttributes, testenv.ServerOptions{UIPort: uiPort})
	uiBase := "http://127.0.0.1:" + uiPort
	testenv.WaitServes(t, uiBase+"/")
	s := rig.New(t, rig.Options{Client: srv.Client(), Sim: llmsim.Options{Scenario: sc}, QueuePrefix: "llm-ui-", Policy: func(cfg *config.Config) {
		qf := cfg.ClassPolicy(failure.QueueFull)
		qf.Max = 1 // one hold, so that the call's story has a fixed length
		cfg.Classes[failure.QueueFull] = qf
	}})
	return chromium, &llmclient.Client{Temporal: srv.Client(), TaskQueue: s.TaskQueue, UIBase: uiBase}, s.Config
}

// reviewsScreenshotFile is docs/rules.md' picture of the queue.
const reviewsScreenshotFile = "../../docs/ui-reviews.png"

// reviewColumns are the columns README tells reviewers to add to the
// list of their queue.
var reviewColumns = []string{"LlmFlag", "LlmReview", "LlmScenario", "LlmTenant"}

// TestWebUIShowsTheReviewQueue: two finance calls on a rate-limited
// upstream get the safe message and each starts a RiskReview; an operator
// opens the queue in the Web UI (running RiskReview workflows, with the
// review columns) and sees both, pending, with their flag and tenant; one
// decided with `starter review approve` leaves the queue.
func TestWebUIShowsTheReviewQueue(t *testing.T) {
	chromium, lc, _ := uiStack(t, &llmsim.Scenario{Name: "reviews", Models: llmsim.InstantModels()})
	uiBase := lc.UIBase
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var reviews []string
	for _, tenant := range []string{"acme", "globex"} {
		res, err := lc.Call(ctx, workflows.CallRequest{Tenant: tenant, UserID: "u-" + uuid.NewString()[:6], Scenario: "finance",
			Messages: []request.Message{{Role: "user", Content: "[[sim fault=rate_limited retry_after=1s]] Please transfer 500 dollars to my landlord"}}})
		require.NoError(t, err)
		require.Equal(t, "finance-sensitive", res.RuleID, res.Reason)
		require.NotEmpty(t, res.Review)
		reviews = append(reviews, res.Review)
	}

	b, err := uicheck.Start(uicheck.Options{Path: chromium, Width: 1600, Height: 360})
	require.NoError(t, err)
	t.Cleanup(b.Close)
	require.NoError(t, b.Open(uiBase+"/namespaces/default/workflows"))
	setColumns(t, b, reviewColumns)

	queue := uiBase + "/namespaces/default/workflows?query=" + url.QueryEscape(`WorkflowType="RiskReview" AND ExecutionStatus="Running"`)
	require.NoError(t, b.Open(queue))
	table, err := b.WaitText("table", 90*time.Second, append(append([]string{}, reviewColumns...),
		"risk_review", "pending", "finance", "acme", "globex", reviews[0][:24], reviews[1][:24])...)
	require.NoError(t, err, "the review queue %s", queue)
	require.NotContains(t, table, "LLMCall", "the queue lists reviews only")
	foldSavedViews(t, b)
	png, err := b.ViewportScreenshot()
	require.NoError(t, err)
	keepScreenshot(t, png, queue, reviewsScreenshotFile)

	// A decided review leaves the queue.
	h, err := lc.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: reviews[0], UpdateName: workflows.UpdateReviewDecision,
		Args: []any{workflows.ReviewDecision{Decision: workflows.DecisionApprove, Reviewer: "alice"}}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	require.NoError(t, err)
	require.NoError(t, h.Get(ctx, nil))
	// (Visibility trails the close by a moment: reload until it shows.)
	deadline := time.Now().Add(30 * time.Second)
	for {
		require.NoError(t, b.Open(queue))
		table, err = b.WaitText("table", 60*time.Second, reviews[1][:24])
		require.NoError(t, err)
		if !strings.Contains(table, reviews[0][:24]) {
			break
		}
		require.True(t, time.Now().Before(deadline), "the approved review %s is still in the queue", reviews[0])
		time.Sleep(time.Second)
	}
}
