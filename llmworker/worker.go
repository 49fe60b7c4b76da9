package llmworker

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-llm/durable-llm/activities"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/workflows"
)

// Options configure New.
type Options struct {
	// Config is the policy; default config.DefaultConfig().
	Config *config.Config
	// Metrics of the activities; default none.
	Metrics activities.Metrics
	// Getenv reads API keys; default os.Getenv.
	Getenv func(string) string
	// Transport under the activities' HTTP client (tests); default the
	// standard transport.
	Transport http.RoundTripper
	// Worker options passed to the Temporal worker. WorkerStopTimeout
	// defaults to the slowest model's timeout + 5 s, so a stopping worker
	// drains its attempts.
	Worker worker.Options
	// TaskQueue; default workflows.TaskQueue.
	TaskQueue string
}

// Worker is a registered, not yet started, durable-llm worker.
type Worker struct {
	worker.Worker
	// Activities are the per-process activities (budget, breakers).
	Activities *activities.Activities
}

// New builds the activities and a Temporal worker with LLMCall and every
// activity registered.
func New(c client.Client, o Options) (*Worker, error) {
	if o.Config == nil {
		o.Config = config.DefaultConfig()
	}
	acts, err := activities.New(activities.Options{
		Config: o.Config, Metrics: o.Metrics, Getenv: o.Getenv, Transport: o.Transport,
	})
	if err != nil {
		return nil, err
	}
	tq := o.TaskQueue
	if tq == "" {
		tq = workflows.TaskQueue
	}
	if o.Worker.WorkerStopTimeout == 0 {
		// On SIGTERM, let in-flight attempts finish rather than turning
		// them into failures: as long as the slowest model may take.
		for _, m := range o.Config.Models {
			o.Worker.WorkerStopTimeout = max(o.Worker.WorkerStopTimeout, m.Timeout.D()+5*time.Second)
		}
	}
	w := worker.New(c, tq, o.Worker)
	w.RegisterWorkflowWithOptions(workflows.LLMCall, workflow.RegisterOptions{Name: workflows.WorkflowName})
	w.RegisterActivity(acts)
	return &Worker{Worker: w, Activities: acts}, nil
}

// EnsureSearchAttributes registers the LLM search attributes that the
// namespace lacks. It is idempotent.
func EnsureSearchAttributes(ctx context.Context, c client.Client, namespace string) error {
	resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("list search attributes of namespace %q: %w", namespace, err)
	}
	missing := map[string]enumspb.IndexedValueType{}
	for name, typ := range workflows.SearchAttributes {
		if _, ok := resp.GetCustomAttributes()[name]; ok {
			continue
		}
		v, err := enumspb.IndexedValueTypeFromString(typ)
		if err != nil {
			return fmt.Errorf("search attribute %s: %w", name, err)
		}
		missing[name] = v
	}
	if len(missing) == 0 {
		return nil
	}
	_, err = c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace: namespace, SearchAttributes: missing,
	})
	if err != nil {
		names := make([]string, 0, len(missing))
		for n := range missing {
			names = append(names, n)
		}
		sort.Strings(names)
		return fmt.Errorf("register search attributes %v in namespace %q: %w", names, namespace, err)
	}
	return nil
}
