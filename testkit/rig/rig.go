// Package rig runs the product's stack for one test: llmsim as every
// model's endpoint, the default policy pointed at it, a worker on a task
// queue of the test's own and, when the test asks, the front door before
// it. What it starts stops when the test ends.
package rig

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/uuid"
	openai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/durable-llm/durable-llm/frontdoor"
	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/llmworker"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/testkit/testenv"
	"github.com/durable-llm/durable-llm/workflows"
)

// Options say how a stack differs from the plain one; each field's zero
// value is the plain stack's.
type Options struct {
	// Client is the Temporal client of the workers and of Calls; nil: the
	// client of Shared's dev server.
	Client client.Client
	// Shared is the package's dev server, used when Client is nil.
	Shared *testenv.Shared
	// Sim is how the stack's llmsim starts.
	Sim llmsim.Options
	// Endpoint is the models' base URL when they are served elsewhere (a
	// real LLM server, the llmsim of the test that started this process);
	// empty: the stack starts llmsim and points every model at it.
	Endpoint string
	// Config is the policy as the test built it, endpoint included; nil:
	// the default policy pointed at the stack's llmsim (or Endpoint). With
	// a Config the stack starts no llmsim.
	Config *config.Config
	// Policy changes the policy before it is validated.
	Policy func(*config.Config)
	// TaskQueue is the workers' task queue; empty: QueuePrefix and eight
	// random characters, a queue of the test's own.
	TaskQueue string
	// QueuePrefix begins the name of the test's own queue; default
	// "llm-test-".
	QueuePrefix string
	// Worker changes the options of every worker the stack starts (Config
	// and TaskQueue set) before it is built.
	Worker func(*llmworker.Options)
	// NoWorker starts no worker: the test starts its own (StartWorker, or
	// a worker process).
	NoWorker bool
}

// Stack is what New started for one test.
type Stack struct {
	// Client is the Temporal client of the workers and of Calls.
	Client client.Client
	// Sim is the stack's llmsim; nil when the models are served elsewhere.
	Sim *llmsim.Server
	// Config is the policy the workers run.
	Config *config.Config
	// TaskQueue is the workers' task queue.
	TaskQueue string
	// Worker is the worker New started; nil with Options.NoWorker.
	Worker *llmworker.Worker
	// Calls makes calls on TaskQueue through Client.
	Calls *llmclient.Client

	t      testing.TB
	worker func(*llmworker.Options)
}

// New starts a stack for t. It skips the test in -short mode when it
// starts Shared's dev server.
func New(t testing.TB, o Options) *Stack {
	t.Helper()
	c := o.Client
	if c == nil {
		require.NotNil(t, o.Shared, "rig: a stack needs Options.Client or Options.Shared")
		c = o.Shared.Server(t).Client()
	}
	s := &Stack{Client: c, Config: o.Config, TaskQueue: o.TaskQueue, t: t, worker: o.Worker}
	if s.Config == nil {
		endpoint := o.Endpoint
		if endpoint == "" {
			s.Sim = Sim(t, o.Sim)
			endpoint = s.Sim.BaseURL
		}
		s.Config = config.DefaultConfig()
		s.Config.OverrideEndpoint(endpoint, "")
	}
	if o.Policy != nil {
		o.Policy(s.Config)
	}
	require.NoError(t, s.Config.Validate())
	if s.TaskQueue == "" {
		prefix := o.QueuePrefix
		if prefix == "" {
			prefix = "llm-test-"
		}
		s.TaskQueue = prefix + uuid.NewString()[:8]
	}
	s.Calls = &llmclient.Client{Temporal: c, TaskQueue: s.TaskQueue}
	if !o.NoWorker {
		s.Worker = s.StartWorker(nil)
	}
	return s
}

// Sim starts llmsim for t and closes it when the test ends.
func Sim(t testing.TB, o llmsim.Options) *llmsim.Server {
	t.Helper()
	sim, err := llmsim.NewServer(o)
	require.NoError(t, err)
	t.Cleanup(sim.Close)
	return sim
}

// StartWorker starts a worker of the stack's policy on its task queue,
// with its options changed by Options.Worker and then by change, and
// stops it when the test ends.
func (s *Stack) StartWorker(change func(*llmworker.Options)) *llmworker.Worker {
	s.t.Helper()
	o := llmworker.Options{Config: s.Config, TaskQueue: s.TaskQueue}
	for _, f := range []func(*llmworker.Options){s.worker, change} {
		if f != nil {
			f(&o)
		}
	}
	w, err := llmworker.New(s.Client, o)
	require.NoError(s.t, err)
	require.NoError(s.t, w.Start())
	s.t.Cleanup(w.Stop)
	return w
}

// Call makes the call through Calls and fails the test if it errs or
// takes over two minutes.
func (s *Stack) Call(req workflows.CallRequest) workflows.CallResult {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := s.Calls.Call(ctx, req)
	require.NoError(s.t, err)
	return res
}

// Upstream is what the stack's llmsim saw of a call.
func (s *Stack) Upstream(id string) llmsim.Conversation {
	return s.Sim.Stats().Conversations[id]
}

// FrontDoor is the front door over the stack: calls on its task queue
// through its client, its policy, the tenants of tokens ("token=tenant,
// …"), and its options then changed by change.
func (s *Stack) FrontDoor(tokens string, change func(*frontdoor.Options)) *frontdoor.Handler {
	s.t.Helper()
	tenants, err := frontdoor.ParseTokens(tokens)
	require.NoError(s.t, err)
	o := frontdoor.Options{
		Client:  &llmclient.Client{Temporal: s.Client, TaskQueue: s.TaskQueue},
		Tenants: tenants,
		Config:  s.Config,
	}
	if change != nil {
		change(&o)
	}
	h, err := frontdoor.New(o)
	require.NoError(s.t, err)
	return h
}

// Door serves FrontDoor(tokens, change) in an httptest server, closed
// when the test ends.
func (s *Stack) Door(tokens string, change func(*frontdoor.Options)) (*frontdoor.Handler, *httptest.Server) {
	s.t.Helper()
	h := s.FrontDoor(tokens, change)
	ts := httptest.NewServer(h)
	s.t.Cleanup(ts.Close)
	return h, ts
}

// OpenAI is the official client of the front door at url with a tenant's
// token; its own retries are off, so that the test sees each answer.
func OpenAI(url, token string, opts ...option.RequestOption) openai.Client {
	return openai.NewClient(append([]option.RequestOption{
		option.WithBaseURL(url + "/v1/"), option.WithAPIKey(token), option.WithMaxRetries(0),
	}, opts...)...)
}

// Context is a context that ends after d or with the test.
func Context(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Resilience decodes x_resilience from the raw JSON of a front-door
// answer.
func Resilience(t testing.TB, raw string) frontdoor.Resilience {
	t.Helper()
	var body struct {
		R *frontdoor.Resilience `json:"x_resilience"`
	}
	require.NoError(t, json.Unmarshal([]byte(raw), &body))
	require.NotNil(t, body.R, "no x_resilience in %s", raw)
	return *body.R
}
