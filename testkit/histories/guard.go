package histories

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/llmworker"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/replay"
	"github.com/durable-llm/durable-llm/workflows"
)

// GuardPath is the name of the recorded history of the fleet's guard
// workflow (LLMGuard), replayed against LLMGuard.
const GuardPath = "guard"

// GuardBeforeMemo is a guard run recorded by the build before the guard
// published its view in its memo, kept (not re-recorded) so that a run of
// that build still in flight is known to replay on this one.
const GuardBeforeMemo = "guard-before-memo"

// GuardBeforeFreshReports is a guard run recorded by the build before each
// report of a workflow task was decoded into a new value, kept likewise.
const GuardBeforeFreshReports = "guard-before-fresh-reports"

// recordGuard records a run of the fleet's guard: a worker whose guard
// continues as new every two reports makes calls whose first model fails
// once, until a run has started from the state a previous run carried and
// continued as new in turn; that run's history is saved.
func recordGuard(ctx context.Context, c client.Client, o Options) (int, error) {
	sim, err := llmsim.NewServer(llmsim.Options{})
	if err != nil {
		return 0, err
	}
	defer sim.Close()
	cfg := config.DefaultConfig()
	cfg.OverrideEndpoint(sim.BaseURL, "")
	tq := workflows.TaskQueue + "-" + GuardPath
	w, err := llmworker.New(c, llmworker.Options{
		Config: cfg, TaskQueue: tq, Getenv: noKeys,
		Worker: worker.Options{Identity: workerIdentity},
		Guards: llmworker.GuardOptions{Interval: 100 * time.Millisecond, ReportsPerRun: 2},
	})
	if err != nil {
		return 0, err
	}
	if err := w.Start(); err != nil {
		return 0, err
	}
	defer w.Stop()
	lc := &llmclient.Client{Temporal: c, TaskQueue: tq}
	id := workflows.GuardID(tq)
	for i := 0; i < 30; i++ {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		_, err := lc.Call(cctx, ask(fmt.Sprintf("%s-%d", GuardPath, i), "[[sim fault=server_error model=qwen-72b times=1]] "+plainQuestion))
		cancel()
		if err != nil {
			return 0, err
		}
		time.Sleep(300 * time.Millisecond) // a report or two
		h, err := restoredRun(ctx, c, id)
		if err != nil {
			return 0, err
		}
		if h == nil {
			continue
		}
		if err := checkGuardHistory(h); err != nil {
			return 0, err
		}
		return len(h.GetEvents()), save(o.Dir, GuardPath, id, h)
	}
	return 0, errors.New("the guard did not continue as new twice after 30 calls")
}

// restoredRun returns the history of a completed run of the guard that
// started from a previous run's state, or nil while there is none.
func restoredRun(ctx context.Context, c client.Client, id string) (*historypb.History, error) {
	latest, err := replay.Fetch(ctx, c, id, "")
	if err != nil {
		return nil, err
	}
	prev := latest.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId()
	if prev == "" {
		return nil, nil
	}
	h, err := replay.Fetch(ctx, c, id, prev)
	if err != nil {
		return nil, err
	}
	if h.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId() == "" {
		return nil, nil // the first run: it restored nothing
	}
	return h, nil
}

func checkGuardHistory(h *historypb.History) error {
	evs := h.GetEvents()
	if last := evs[len(evs)-1].GetEventType(); last != enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW {
		return fmt.Errorf("guard history ends with %s, want continued-as-new", last)
	}
	published := false
	for _, ev := range evs {
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED {
			return fmt.Errorf("guard workflow task failed (event %d): %s", ev.GetEventId(), ev.GetWorkflowTaskFailedEventAttributes().GetFailure().GetMessage())
		}
		published = published || ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED
	}
	if !published {
		return errors.New("the guard run never published its view in its memo")
	}
	return nil
}
