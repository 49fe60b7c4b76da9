package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	goopenai "github.com/sashabaranov/go-openai"
	"go.temporal.io/sdk/client"

	"github.com/durable-llm/durable-llm/frontdoor"
	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/llmworker"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/guard"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/workflows"
)

// Model is the model every contender asks first.
const Model = "qwen-72b"

// SystemPrompt is the system message of every benchmark call.
const SystemPrompt = "You are a customer service agent for an online shop. Answer briefly."

// Question returns the user question of call i; every call asks a
// different one.
func Question(i int) string {
	return fmt.Sprintf("Where is my order #%d? It has not arrived yet.", 100000+i)
}

// Contender is one client strategy under test.
type Contender struct {
	// Name is the short name used in tables and charts.
	Name string
	// About says what it does, in one line.
	About string
	// Call makes one logical call.
	Call CallFunc
	// Close releases what the contender started (a worker, connections).
	Close func()
	// KeyOf, when set, is the conversation key llmsim files call i's
	// requests under, known before the call starts: the sweep numbers the
	// simulator's draws by it so that every contender meets the same
	// faults (llmsim.Options.CallNumber).
	KeyOf func(i int) string
}

// callKey is the conversation key of call i of the go-openai contenders.
func callKey(i int) string { return fmt.Sprintf("call-%d", i) }

// Contender names, in the order tables list them.
const (
	NameOneShot  = "one-shot"
	NameNaive    = "naive loop"
	NameBackoff  = "exp backoff, no jitter"
	NameOpenAIGo = "openai-go defaults"
	NameTemporal = "Temporal default retry"
	NameLiteLLM  = "LiteLLM-Router style"
	NameDurable  = "durable-llm"
	// NameDurableDoor is durable-llm through the front door.
	NameDurableDoor = "durable-llm, front door"
	// NameDurableDoorEager is the front door with a worker in its process
	// (starter serve --worker): its calls start eagerly.
	NameDurableDoorEager = "durable-llm, front door + worker (eager start)"
	NameDurable3         = "durable-llm, 3 workers"
	// NameDurableAnthropic is durable-llm with its ladder on Anthropic's wire.
	NameDurableAnthropic = "durable-llm, Anthropic wire"
	NameDirect           = "direct go-openai"
	NameFloor            = "bare 1-activity workflow"
)

// NameImpatient is the one-shot client whose timeout is the policy's
// first_token_timeout.
const NameImpatient = "impatient one-shot"

// callTag carries a call's key to tagTransport; n counts its requests.
type callTag struct {
	key string
	n   atomic.Int32
}

type tagKey struct{}

// withCall tags ctx with a call key: every request sent under it carries
// Idempotency-Key and X-Request-ID "<key>/<n>", so llmsim counts the
// attempts of each logical call (the way durable-llm labels its own).
func withCall(ctx context.Context, key string, firstN int) context.Context {
	t := &callTag{key: key}
	t.n.Store(int32(firstN - 1))
	return context.WithValue(ctx, tagKey{}, t)
}

// tagTransport adds the call's headers to each request.
type tagTransport struct{ base *http.Transport }

func (t tagTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if tag, ok := r.Context().Value(tagKey{}).(*callTag); ok {
		id := fmt.Sprintf("%s/%d", tag.key, tag.n.Add(1))
		r = r.Clone(r.Context())
		r.Header.Set("Idempotency-Key", id)
		r.Header.Set("X-Request-ID", id)
	}
	return t.base.RoundTrip(r)
}

// newHTTPClient is an http.Client whose requests carry the call's key. It
// keeps up to 256 idle connections to the upstream, so connection set-up
// does not weigh on the benchmark machine's CPU.
func newHTTPClient() (*http.Client, func()) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 512, 256
	return &http.Client{Transport: tagTransport{base: tr}}, tr.CloseIdleConnections
}

func goOpenAIClient(baseURL string, hc *http.Client) *goopenai.Client {
	cfg := goopenai.DefaultConfig(frontDoorToken)
	cfg.BaseURL = baseURL
	cfg.HTTPClient = hc
	return goopenai.NewClientWithConfig(cfg)
}

func chatRequest(i int) goopenai.ChatCompletionRequest {
	return goopenai.ChatCompletionRequest{
		Model: Model,
		Messages: []goopenai.ChatCompletionMessage{
			{Role: goopenai.ChatMessageRoleSystem, Content: SystemPrompt},
			{Role: goopenai.ChatMessageRoleUser, Content: Question(i)},
		},
	}
}

// errNoAnswer is a 200 response without an answer.
var errNoAnswer = errors.New("response without an answer")

func goOpenAIAnswer(resp goopenai.ChatCompletionResponse, err error) error {
	if err != nil {
		return err
	}
	if len(resp.Choices) == 0 || resp.Choices[0].Message.Content == "" {
		return errNoAnswer
	}
	return nil
}

// NewOneShot is a client with no resilience layer: go-openai, one request
// per call, no retry, the call's deadline as its only timeout. Its share
// of model answers is the floor no resilience layer may fall below.
func NewOneShot(baseURL string, deadline time.Duration) *Contender {
	return newSingleRequest(NameOneShot, fmt.Sprintf("go-openai, one request per call, no retry, the %s deadline as its timeout", fmtDur(deadline)),
		baseURL, deadline)
}

// NewImpatientOneShot is the one-shot client with a shorter timeout: one
// request per call, given up after timeout (the policy's
// first_token_timeout in the sweep). It answers what a client that
// abandons a slow request without retrying it would answer, the other
// bound a resilience layer is judged against.
func NewImpatientOneShot(baseURL string, timeout time.Duration) *Contender {
	return newSingleRequest(NameImpatient, fmt.Sprintf("go-openai, one request per call, no retry, a %s timeout", fmtDur(timeout)),
		baseURL, timeout)
}

// newSingleRequest is a go-openai client that sends one request per call
// and gives up after timeout.
func newSingleRequest(name, about, baseURL string, timeout time.Duration) *Contender {
	hc, closeIdle := newHTTPClient()
	c := goOpenAIClient(baseURL, hc)
	call := func(ctx context.Context, i int) Result {
		key := callKey(i)
		ctx, cancel := context.WithTimeout(withCall(ctx, key, 1), timeout)
		defer cancel()
		err := goOpenAIAnswer(c.CreateChatCompletion(ctx, chatRequest(i)))
		r := Result{Key: key, Answered: err == nil, ByModel: err == nil, Err: err}
		if err == nil {
			r.Model = Model
		}
		return r
	}
	return &Contender{Name: name, About: about, Call: call, Close: closeIdle, KeyOf: callKey}
}

// NewNaive is the naive retry loop: go-openai with a fixed per-attempt
// timeout and up to three immediate retries on any error.
func NewNaive(baseURL string, timeout, deadline time.Duration) *Contender {
	return newRetryLoop(NameNaive,
		fmt.Sprintf("go-openai, %s timeout, immediate retries ×3", fmtDur(timeout)),
		baseURL, timeout, deadline, []time.Duration{0, 0, 0})
}

// NewBackoff is exponential backoff without jitter: go-openai with a fixed
// per-attempt timeout and waits of 1, 2 and 4 s between its four attempts.
func NewBackoff(baseURL string, timeout, deadline time.Duration) *Contender {
	return newRetryLoop(NameBackoff,
		fmt.Sprintf("go-openai, %s timeout, waits 1 s, 2 s, 4 s", fmtDur(timeout)),
		baseURL, timeout, deadline, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second})
}

func newRetryLoop(name, about, baseURL string, timeout, deadline time.Duration, waits []time.Duration) *Contender {
	hc, closeIdle := newHTTPClient()
	c := goOpenAIClient(baseURL, hc)
	call := func(ctx context.Context, i int) Result {
		key := fmt.Sprintf("call-%d", i)
		ctx, cancel := context.WithTimeout(withCall(ctx, key, 1), deadline)
		defer cancel()
		var err error
		for a := 0; ; a++ {
			actx, acancel := context.WithTimeout(ctx, timeout)
			err = goOpenAIAnswer(c.CreateChatCompletion(actx, chatRequest(i)))
			acancel()
			if err == nil {
				return Result{Key: key, Answered: true, ByModel: true}
			}
			if a == len(waits) || ctx.Err() != nil {
				break
			}
			if !sleepCtx(ctx, waits[a]) {
				break
			}
		}
		return Result{Key: key, Err: err}
	}
	return &Contender{Name: name, About: about, Call: call, Close: closeIdle}
}

// NewLiteLLM is a LiteLLM-Router-style policy: each model of the ladder
// (qwen-72b, then its fallbacks qwen-14b and llama-8b, each at urlFor's
// base URL) gets 1 + 3 attempts with the per-attempt timeout, waiting
// between them the upstream's Retry-After when it sent one of at most
// 60 s, else LiteLLM's exponential backoff 0.5 s·2ⁿ × (1 − U/4) capped at
// 8 s; when a model's retries are spent, the next model.
func NewLiteLLM(urlFor func(model string) string, timeout, deadline time.Duration) *Contender {
	hc, closeIdle := newHTTPClient()
	models := []string{"qwen-72b", "qwen-14b", "llama-8b"}
	clients := map[string]*goopenai.Client{}
	for _, m := range models {
		clients[m] = goOpenAIClient(urlFor(m), &http.Client{Transport: retryAfterTransport{hc.Transport}})
	}
	call := func(ctx context.Context, i int) Result {
		key := callKey(i)
		ctx, cancel := context.WithTimeout(withCall(ctx, key, 1), deadline)
		defer cancel()
		var err error
		for _, m := range models {
			for n := 0; n <= 3; n++ {
				ra := new(retryAfter)
				actx, acancel := context.WithTimeout(context.WithValue(ctx, retryAfterKey{}, ra), timeout)
				req := chatRequest(i)
				req.Model = m
				err = goOpenAIAnswer(clients[m].CreateChatCompletion(actx, req))
				acancel()
				if err == nil {
					return Result{Key: key, Answered: true, ByModel: true, Model: m}
				}
				if ctx.Err() != nil {
					return Result{Key: key, Err: err}
				}
				if n == 3 {
					break
				}
				wait := ra.d
				if wait <= 0 || wait > time.Minute {
					wait = min(time.Duration(float64(500*time.Millisecond)*math.Pow(2, float64(n))*(1-rand.Float64()/4)), 8*time.Second)
				}
				if !sleepCtx(ctx, wait) {
					return Result{Key: key, Err: err}
				}
			}
		}
		return Result{Key: key, Err: err}
	}
	return &Contender{Name: NameLiteLLM, About: fmt.Sprintf("go-openai, %s timeout; per model 3 retries (Retry-After, else 0.5 s·2ⁿ backoff), then the next model", fmtDur(timeout)),
		Call: call, Close: closeIdle, KeyOf: callKey}
}

// retryAfter is the Retry-After of the last response of one attempt.
type retryAfter struct{ d time.Duration }

type retryAfterKey struct{}

// retryAfterTransport records a response's Retry-After (seconds) in the
// request context's retryAfter.
type retryAfterTransport struct{ base http.RoundTripper }

func (t retryAfterTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if ra, ok := r.Context().Value(retryAfterKey{}).(*retryAfter); ok && err == nil {
		if s, perr := strconv.ParseFloat(resp.Header.Get("Retry-After"), 64); perr == nil && s >= 0 {
			ra.d = time.Duration(s * float64(time.Second))
		}
	}
	return resp, err
}

// NewOpenAIGo is the official openai-go/v3 client with its defaults as
// shipped (2 retries with its own backoff, Retry-After honoured, no
// per-request timeout); only the call's overall deadline bounds it.
func NewOpenAIGo(baseURL string, deadline time.Duration) *Contender {
	hc, closeIdle := newHTTPClient()
	c := oai.NewClient(option.WithBaseURL(baseURL), option.WithAPIKey("bench"), option.WithHTTPClient(hc))
	call := func(ctx context.Context, i int) Result {
		key := fmt.Sprintf("call-%d", i)
		ctx, cancel := context.WithTimeout(withCall(ctx, key, 1), deadline)
		defer cancel()
		resp, err := c.Chat.Completions.New(ctx, oai.ChatCompletionNewParams{
			Model: Model,
			Messages: []oai.ChatCompletionMessageParamUnion{
				oai.SystemMessage(SystemPrompt), oai.UserMessage(Question(i)),
			},
		})
		if err == nil && (len(resp.Choices) == 0 || resp.Choices[0].Message.Content == "") {
			err = errNoAnswer
		}
		if err != nil {
			return Result{Key: key, Err: err}
		}
		return Result{Key: key, Answered: true, ByModel: true}
	}
	return &Contender{Name: NameOpenAIGo, About: "openai-go/v3, defaults (2 retries, backoff 0.5 s·2^n, no timeout)", Call: call, Close: closeIdle}
}

// NewDirect is one go-openai call with no retry (the overhead baseline).
func NewDirect(baseURL string) *Contender {
	hc, closeIdle := newHTTPClient()
	c := goOpenAIClient(baseURL, hc)
	call := func(ctx context.Context, i int) Result {
		key := fmt.Sprintf("call-%d", i)
		err := goOpenAIAnswer(c.CreateChatCompletion(withCall(ctx, key, 1), chatRequest(i)))
		return Result{Key: key, Answered: err == nil, ByModel: err == nil, Err: err}
	}
	return &Contender{Name: NameDirect, About: "go-openai, one request, no retry", Call: call, Close: closeIdle}
}

// NewTemporalDefault is a bare workflow whose one activity makes the
// go-openai call, with the given StartToClose timeout and Temporal's default
// retry policy (1 s initial interval, coefficient 2, unlimited attempts);
// the workflow execution timeout is the call's deadline. It starts a worker
// for the workflow on its own task queue of c's server.
func NewTemporalDefault(c client.Client, baseURL string, startToClose, deadline time.Duration) (*Contender, error) {
	b, err := StartBareWorker(c, baseURL)
	if err != nil {
		return nil, err
	}
	call := func(ctx context.Context, i int) Result {
		key := fmt.Sprintf("%s-%d", b.TaskQueue, i)
		ctx, cancel := context.WithTimeout(ctx, deadline+10*time.Second)
		defer cancel()
		err := b.Call(ctx, key, BareInput{Key: key, Question: Question(i), StartToClose: startToClose}, deadline)
		return Result{Key: key, Answered: err == nil, ByModel: err == nil, Err: err}
	}
	return &Contender{
		Name:  NameTemporal,
		About: fmt.Sprintf("workflow + 1 activity (go-openai), StartToClose %s, default RetryPolicy", fmtDur(startToClose)),
		Call:  call, Close: b.Stop,
	}, nil
}

// NewFloor is the bare one-activity workflow used as Temporal's floor in
// the overhead benchmark: the same workflow as NewTemporalDefault with a
// 30 s StartToClose.
func NewFloor(c client.Client, baseURL string) (*Contender, error) {
	t, err := NewTemporalDefault(c, baseURL, 30*time.Second, time.Minute)
	if err != nil {
		return nil, err
	}
	t.Name, t.About = NameFloor, "workflow + 1 activity (go-openai)"
	return t, nil
}

// DurableOptions tune NewDurable.
type DurableOptions struct {
	// Config is the policy; default config.DefaultConfig(). Its models
	// are pointed at the benchmark's upstream.
	Config *config.Config
	// Worker configures the in-process worker (llmworker.Options.Worker is
	// replaced by it); zero: the SDK defaults.
	Worker llmworker.Options
	// Deadline is the call's deadline_ms; 0: the policy's default.
	Deadline time.Duration
	// Mutate, when set, changes the policy after its models were pointed
	// at the upstream.
	Mutate func(*config.Config)
	// Workers is the number of workers on the task queue, each a process
	// of its own as far as its guards go; 0 means 1.
	Workers int
	// Name and About, when set, name the contender in reports.
	Name, About string
	// Without are guard rules the workers do not apply (bench -without).
	Without []guard.RuleName
	// EagerStart starts calls with Temporal's Eager Workflow Start
	// (llmclient.Client.EagerStart): the worker is in the caller's
	// process, on the same Temporal client.
	EagerStart bool
}

// durablePath is res's attempts and reason in a line.
func durablePath(res workflows.CallResult) string {
	var parts []string
	for _, a := range res.Attempts {
		p := a.Model + ":" + cmp.Or(a.Class, "ok") + ":" + a.Decision
		if a.Rule != "" {
			p += "(" + a.Rule + ")"
		}
		if a.DelayMS > 0 {
			p += fmt.Sprintf("+%dms", a.DelayMS)
		}
		parts = append(parts, p)
	}
	if res.Reason != "" {
		parts = append(parts, "reason: "+res.Reason)
	}
	return strings.Join(parts, " > ")
}

// NewDurable is durable-llm: LLMCall through llmclient on an in-process
// worker (llmworker, default policy pointed at baseURL) on its own task
// queue of c's server.
func NewDurable(c client.Client, baseURL string, o DurableOptions) (*Contender, error) {
	lc, cfg, stop, err := startDurableWorker(c, baseURL, o)
	if err != nil {
		return nil, err
	}
	tq := lc.TaskQueue
	deadline := o.Deadline
	if deadline <= 0 {
		deadline = cfg.Call.Deadline.D()
	}
	call := func(ctx context.Context, i int) Result {
		req := DurableRequest(tq, i, deadline)
		key, _ := llmclient.Key(req)
		ctx, cancel := context.WithTimeout(ctx, deadline+10*time.Second)
		defer cancel()
		res, err := lc.Call(ctx, req)
		if err != nil {
			return Result{Key: key, Err: err}
		}
		return durableResult(key, res)
	}
	keyOf := func(i int) string {
		key, _ := llmclient.Key(DurableRequest(tq, i, deadline))
		return key
	}
	name, about := NameDurable, "LLMCall workflow via llmclient, default policy"
	if o.Workers > 1 {
		name, about = fmt.Sprintf("durable-llm, %d workers", o.Workers), fmt.Sprintf("as durable-llm, with %d workers on the task queue sharing their guards through the guard workflow", o.Workers)
	}
	if o.Name != "" {
		name, about = o.Name, o.About
	}
	return &Contender{Name: name, About: about, Call: call, Close: stop, KeyOf: keyOf}, nil
}

// NewDurableDoor is durable-llm through the front door: go-openai's chat
// completion (not streamed) to frontdoor.Handler on a local HTTP server, in
// front of an in-process worker as NewDurable's. Its results' keys are the
// calls' workflow IDs (the door's X-Workflow-ID header).
func NewDurableDoor(c client.Client, baseURL string, o DurableOptions) (*Contender, error) {
	// No tenant limits: the door's own cost is measured, not its limits'.
	tenants, err := frontdoor.ParseTenantsFile([]byte(`defaults: {requests_per_minute: 0, tokens_per_minute: 0, max_in_flight: 0, validation_ms_per_minute: 0}
tenants: [{name: bench, tokens: [`+frontDoorToken+`]}]
`), "the overhead benchmark's tenants")
	if err != nil {
		return nil, err
	}
	srv, cfg, stop, err := startDurableDoor(c, baseURL, o, tenants)
	if err != nil {
		return nil, err
	}
	hc, closeIdle := newHTTPClient()
	oc := goOpenAIClient(srv.URL+"/v1", hc)
	run := randomID()
	call := func(ctx context.Context, i int) Result {
		ctx, cancel := context.WithTimeout(ctx, cfg.Call.Deadline.D()+10*time.Second)
		defer cancel()
		req := goopenai.ChatCompletionRequest{Model: "auto", User: fmt.Sprintf("%s-u%d", run, i), // a call of its own
			Messages: []goopenai.ChatCompletionMessage{
				{Role: goopenai.ChatMessageRoleSystem, Content: SystemPrompt},
				{Role: goopenai.ChatMessageRoleUser, Content: Question(i)},
			}}
		resp, err := oc.CreateChatCompletion(ctx, req)
		key := resp.Header().Get(frontdoor.HeaderWorkflowID)
		if err != nil {
			return Result{Key: key, Err: err}
		}
		answered := len(resp.Choices) > 0 && resp.Choices[0].Message.Content != ""
		return Result{Key: key, Answered: answered, ByModel: answered}
	}
	name, about := NameDurableDoor, "the same through the front door (POST /v1/chat/completions) with go-openai"
	if o.EagerStart {
		name, about = NameDurableDoorEager, "the same, the door starting its calls eagerly on the worker in its process (starter serve --worker)"
	}
	return &Contender{Name: name, About: about, Call: call,
		Close: func() { stop(); closeIdle() }}, nil
}

// startDurableDoor starts an in-process worker (startDurableWorker) and
// the front door for tenants in front of it, on a local HTTP server; stop
// closes the door, then the worker.
func startDurableDoor(c client.Client, baseURL string, o DurableOptions, tenants *frontdoor.Tenants) (*httptest.Server, *config.Config, func(), error) {
	lc, cfg, stopWorker, err := startDurableWorker(c, baseURL, o)
	if err != nil {
		return nil, nil, nil, err
	}
	srv, err := serveFrontDoor(lc, cfg, tenants)
	if err != nil {
		stopWorker()
		return nil, nil, nil, err
	}
	return srv, cfg, func() { srv.Close(); stopWorker() }, nil
}

// startDurableWorker starts an in-process llmworker (o's policy, default
// config.DefaultConfig(), pointed at baseURL) on a task queue of its own
// and returns a client of that queue, the policy and the worker's stop.
func startDurableWorker(c client.Client, baseURL string, o DurableOptions) (*llmclient.Client, *config.Config, func(), error) {
	cfg := o.Config
	if cfg == nil {
		cfg = config.DefaultConfig()
	}
	cfg.OverrideEndpoint(baseURL, "")
	if o.Mutate != nil {
		o.Mutate(cfg)
	}
	if err := cfg.Validate(); err != nil {
		return nil, nil, nil, err
	}
	tq := "bench-durable-" + randomID()
	var workers []*llmworker.Worker
	stop := func() {
		for _, w := range workers {
			w.Stop()
		}
	}
	for range max(o.Workers, 1) {
		wo := o.Worker
		wo.Config, wo.TaskQueue, wo.Without = cfg, tq, o.Without
		w, err := llmworker.New(c, wo)
		if err == nil {
			err = w.Start()
		}
		if err != nil {
			stop()
			return nil, nil, nil, err
		}
		workers = append(workers, w)
	}
	return &llmclient.Client{Temporal: c, TaskQueue: tq, EagerStart: o.EagerStart}, cfg, stop, nil
}

// serveFrontDoor serves the front door for tenants, in front of lc's
// workers, on a local HTTP server.
func serveFrontDoor(lc *llmclient.Client, cfg *config.Config, tenants *frontdoor.Tenants) (*httptest.Server, error) {
	h, err := frontdoor.New(frontdoor.Options{Client: lc, Tenants: tenants, Config: cfg})
	if err != nil {
		return nil, err
	}
	return httptest.NewServer(h), nil
}

// DurableRequest is the CallRequest of call i in a run: the same messages
// as the baselines send, a user of its own (so each call has its own
// idempotency key) and the deadline.
func DurableRequest(run string, i int, deadline time.Duration) workflows.CallRequest {
	return workflows.CallRequest{
		UserID: fmt.Sprintf("%s-u%d", run, i), SessionID: "s-1", Scenario: "customer_service",
		Messages: []request.Message{
			{Role: request.RoleSystem, Content: SystemPrompt},
			{Role: request.RoleUser, Content: Question(i)},
		},
		DeadlineMS: deadline.Milliseconds(),
	}
}

// sleepCtx waits d; false when ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// durableResult is how a durable-llm call of key ended, as the benchmarks
// judge it. A model's complete answer counts whichever rung wrote it: the
// workflow marks a lower rung's answer degraded (served by a fallback
// model), which is no mark against the answer itself. Result.Degraded is
// kept for an answer no model completed: text streamed before the models
// ran out, or the best text kept when retries ran out (finish_reason
// "length").
func durableResult(key string, res workflows.CallResult) Result {
	byModel := res.Source == workflows.SourceModel || res.Source == workflows.SourceFallbackModel
	complete := res.FinishReason == "stop" || res.FinishReason == "tool_calls"
	r := Result{Key: key, Answered: res.Content != "", ByModel: byModel, Source: string(res.Source), Path: durablePath(res),
		Degraded: res.Degraded && !complete}
	if byModel {
		r.Model = res.Model
	}
	return r
}
