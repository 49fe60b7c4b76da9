package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	goopenai "github.com/sashabaranov/go-openai"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// BareWorkflowName is the registered name of BareWorkflow.
const BareWorkflowName = "BenchBareCall"

// BareInput is the input of BareWorkflow.
type BareInput struct {
	// Key labels the upstream requests ("<key>/<activity attempt>").
	Key string `json:"key"`
	// Question is the user message.
	Question string `json:"question"`
	// StartToClose bounds each activity attempt.
	StartToClose time.Duration `json:"start_to_close"`
}

// BareWorkflow is the simplest durable LLM call: one activity that makes
// the go-openai call, retried by Temporal's default retry policy. It is the
// Temporal baseline of the storm benchmark and Temporal's floor in the
// overhead benchmark.
func BareWorkflow(ctx workflow.Context, in BareInput) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: in.StartToClose})
	var a *BareActivities
	var answer string
	err := workflow.ExecuteActivity(ctx, a.Chat, in).Get(ctx, &answer)
	return answer, err
}

// BareActivities holds the go-openai client of BareWorkflow's activity.
type BareActivities struct {
	client *goopenai.Client
}

// Chat makes one chat completion request; a response without an answer is
// an error (and so retried).
func (a *BareActivities) Chat(ctx context.Context, in BareInput) (string, error) {
	ctx = withCall(ctx, in.Key, int(activity.GetInfo(ctx).Attempt))
	req := chatRequest(0)
	req.Messages[1].Content = in.Question
	resp, err := a.client.CreateChatCompletion(ctx, req)
	if err = goOpenAIAnswer(resp, err); err != nil {
		return "", err
	}
	return resp.Choices[0].Message.Content, nil
}

// BareWorker runs BareWorkflow on a task queue of its own.
type BareWorker struct {
	// TaskQueue the worker polls.
	TaskQueue string
	c         client.Client
	w         worker.Worker
	closeIdle func()
}

// StartBareWorker starts a worker for BareWorkflow whose activity calls
// baseURL.
func StartBareWorker(c client.Client, baseURL string) (*BareWorker, error) {
	hc, closeIdle := newHTTPClient()
	b := &BareWorker{TaskQueue: "bench-bare-" + randomID(), c: c, closeIdle: closeIdle}
	b.w = worker.New(c, b.TaskQueue, worker.Options{})
	b.w.RegisterWorkflowWithOptions(BareWorkflow, workflow.RegisterOptions{Name: BareWorkflowName})
	b.w.RegisterActivity(&BareActivities{client: goOpenAIClient(baseURL, hc)})
	if err := b.w.Start(); err != nil {
		return nil, fmt.Errorf("bare worker: %w", err)
	}
	return b, nil
}

// Call runs BareWorkflow under workflow ID id and waits for it; the
// workflow execution timeout is deadline.
func (b *BareWorker) Call(ctx context.Context, id string, in BareInput, deadline time.Duration) error {
	run, err := b.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: id, TaskQueue: b.TaskQueue, WorkflowExecutionTimeout: deadline,
	}, BareWorkflowName, in)
	if err != nil {
		return err
	}
	return run.Get(ctx, nil)
}

// Stop stops the worker.
func (b *BareWorker) Stop() {
	b.w.Stop()
	b.closeIdle()
}

func randomID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
