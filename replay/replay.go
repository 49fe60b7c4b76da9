package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"strconv"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/workflows"
)

// ErrNonDeterministic is wrapped by the error of a history whose commands
// the workflow code of this build no longer reproduces.
var ErrNonDeterministic = errors.New("non-deterministic against this build")

// Failure is the error of a history that did not replay.
type Failure struct {
	// WorkflowID of the history ("" when unknown); RunID for live ones.
	WorkflowID string
	RunID      string
	// File is the history's file, "" for a live history.
	File string
	// NonDeterministic reports Temporal's non-determinism error
	// (TMPRL1100); otherwise the code failed to replay in another way
	// (a panic, an unknown workflow type).
	NonDeterministic bool
	// Err is the replayer's error.
	Err error
}

// Error names the workflow, where its history came from and what failed.
func (f *Failure) Error() string {
	what := "did not replay"
	if f.NonDeterministic {
		what = "is not deterministic against this build"
	}
	id := f.WorkflowID
	if id == "" {
		id = "(unknown ID)"
	}
	where := ""
	switch {
	case f.File != "":
		where = " (" + f.File + ")"
	case f.RunID != "":
		where = " (run " + f.RunID + ")"
	}
	return fmt.Sprintf("workflow %s%s %s: %s", id, where, what, Reason(f.Err))
}

// Unwrap returns the replayer's error and, for a non-determinism,
// ErrNonDeterministic.
func (f *Failure) Unwrap() []error {
	if f.NonDeterministic {
		return []error{f.Err, ErrNonDeterministic}
	}
	return []error{f.Err}
}

// Options configure New. Zero values mean defaults.
type Options struct {
	// Register registers the workflow code the histories are replayed
	// against; default: workflows.LLMCall under workflows.WorkflowName, i.e.
	// this build. Tests register altered copies to see a failure.
	Register func(worker.WorkflowRegistry)
	// Replayer are the options of the SDK's workflow replayer (data
	// converter, interceptors); default: the SDK's defaults.
	Replayer worker.WorkflowReplayerOptions
	// Out receives one line per history as it is replayed; default
	// discarded.
	Out io.Writer
	// Logger receives the SDK's replay log; default none.
	Logger log.Logger
}

// Checker replays histories against one registration of the workflow code.
// It is not safe for concurrent use.
type Checker struct {
	replayer worker.WorkflowReplayer
	dc       converter.DataConverter
	out      io.Writer
	logger   log.Logger
}

// New builds a Checker.
func New(o Options) (*Checker, error) {
	r, err := worker.NewWorkflowReplayerWithOptions(o.Replayer)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	if o.Register == nil {
		o.Register = RegisterThisBuild
	}
	o.Register(r)
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Logger == nil {
		// The SDK's default logger prints a stack trace for every rejected
		// history; the report line says what matters.
		o.Logger = log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	}
	return &Checker{replayer: r, dc: o.Replayer.DataConverter, out: o.Out, logger: o.Logger}, nil
}

// RegisterThisBuild registers this build's workflows under their names:
// LLMCall and the fleet's LLMGuard.
func RegisterThisBuild(r worker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(workflows.LLMCall, workflow.RegisterOptions{Name: workflows.WorkflowName})
	r.RegisterWorkflowWithOptions(workflows.LLMGuard, workflow.RegisterOptions{Name: workflows.GuardWorkflowName})
	r.RegisterWorkflowWithOptions(workflows.RiskReview, workflow.RegisterOptions{Name: workflows.ReviewWorkflowName})
}

// Status words of the report lines.
const (
	StatusOK               = "OK"
	StatusNonDeterministic = "NON-DETERMINISTIC"
	StatusFailed           = "REPLAY-FAILED"
)

// History replays one history and writes its report line. It returns nil
// or a *Failure. id, runID and file only label the history (and set the
// workflow ID and run ID the code sees while replaying); any may be empty.
func (c *Checker) History(h *historypb.History, id, runID, file string) error {
	err := c.replayer.ReplayWorkflowHistoryWithOptions(c.logger, h, worker.ReplayWorkflowHistoryOptions{
		OriginalExecution: workflow.Execution{ID: id, RunID: runID},
	})
	label := id
	if label == "" {
		label = "-"
	}
	where := file
	if where == "" && runID != "" {
		where = "run " + runID
	}
	if err == nil {
		fmt.Fprintf(c.out, "%-17s  %s  %s\n", StatusOK, label, where)
		return nil
	}
	f := &Failure{WorkflowID: id, RunID: runID, File: file, NonDeterministic: IsNonDeterminism(err), Err: err}
	status := StatusFailed
	if f.NonDeterministic {
		status = StatusNonDeterministic
	}
	fmt.Fprintf(c.out, "%-17s  %s  %s: %s\n", status, label, where, Reason(err))
	return f
}

// Files replays history files in order and stops at the first failure
// (a *Failure) or unreadable file. It returns how many histories replayed
// successfully.
func (c *Checker) Files(paths []string) (int, error) {
	n := 0
	for _, p := range paths {
		h, err := LoadFile(p)
		if err != nil {
			return n, err
		}
		if err := c.History(h, WorkflowID(h, c.dc), "", p); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// Query lists the workflows that match a visibility query on the server of
// tc (in its namespace), newest first as the server lists them, fetches
// each history and replays it, at most limit of them (0: all). It stops at
// the first failure (a *Failure) and returns how many histories replayed
// successfully. Running workflows are replayed up to their last event.
func (c *Checker) Query(ctx context.Context, tc client.Client, query string, limit int) (int, error) {
	n := 0
	var token []byte
	for {
		size := 100
		if limit > 0 && limit-n < size {
			size = limit - n
		}
		resp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			PageSize: int32(size), NextPageToken: token, Query: query,
		})
		if err != nil {
			return n, fmt.Errorf("list workflows matching %q: %w", query, err)
		}
		for _, e := range resp.GetExecutions() {
			if limit > 0 && n >= limit {
				return n, nil
			}
			ex := e.GetExecution()
			h, err := Fetch(ctx, tc, ex.GetWorkflowId(), ex.GetRunId())
			if err != nil {
				return n, err
			}
			if err := c.History(h, ex.GetWorkflowId(), ex.GetRunId(), ""); err != nil {
				return n, err
			}
			n++
		}
		token = resp.GetNextPageToken()
		if len(token) == 0 || (limit > 0 && n >= limit) {
			return n, nil
		}
	}
}

// Fetch reads the whole history of a workflow run from the server.
func Fetch(ctx context.Context, tc client.Client, id, runID string) (*historypb.History, error) {
	it := tc.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("history of workflow %s (run %s): %w", id, runID, err)
		}
		h.Events = append(h.Events, e)
	}
	return h, nil
}

// LoadFile reads a history file: the JSON of a History as
// `temporal workflow show --output json` writes it (shorthand payloads or
// not).
func LoadFile(path string) (*historypb.History, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	h, err := Unmarshal(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return h, nil
}

// Unmarshal decodes the JSON of a History, with or without shorthand
// payloads.
func Unmarshal(data []byte) (*historypb.History, error) {
	h := &historypb.History{}
	opts := temporalproto.CustomJSONUnmarshalOptions{
		DiscardUnknown: true,
		// Accepts both: a payload with metadata is read as is, one without
		// as shorthand JSON.
		Metadata: map[string]any{commonpb.EnablePayloadShorthandMetadataKey: true},
	}
	if err := opts.Unmarshal(data, h); err != nil {
		return nil, fmt.Errorf("not the JSON of a workflow history: %w", err)
	}
	if len(h.GetEvents()) == 0 {
		return nil, errors.New("not the JSON of a workflow history: no events")
	}
	return h, nil
}

// Marshal encodes a History as indented JSON with plain (not shorthand)
// payloads, which the SDK's ReplayWorkflowHistoryFromJSONFile and the
// Temporal CLI both read.
func Marshal(h *historypb.History) ([]byte, error) {
	data, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(h)
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// WorkflowID returns the workflow ID of an LLMCall history: its
// idempotency key, computed from the input as the client computes it, with
// dc decoding the input (nil: the default data converter). It returns ""
// for another workflow type or an input it cannot decode. A call started
// with an explicit workflow ID by other means is labelled with its
// idempotency key all the same.
func WorkflowID(h *historypb.History, dc converter.DataConverter) string {
	if dc == nil {
		dc = converter.GetDefaultDataConverter()
	}
	evs := h.GetEvents()
	if len(evs) == 0 {
		return ""
	}
	attr := evs[0].GetWorkflowExecutionStartedEventAttributes()
	if attr == nil || attr.GetWorkflowType().GetName() != workflows.WorkflowName {
		return ""
	}
	var req workflows.CallRequest
	if err := dc.FromPayloads(attr.GetInput(), &req); err != nil {
		return ""
	}
	return request.KeyFor(req)
}

// IsNonDeterminism reports whether a replay error is Temporal's
// non-determinism error (error code TMPRL1100).
func IsNonDeterminism(err error) bool {
	if err == nil {
		return false
	}
	s := err.Error()
	return strings.Contains(s, "TMPRL1100") || strings.Contains(s, "nondeterministic workflow")
}

var failureMessage = regexp.MustCompile(`message:("(?:[^"\\]|\\.)*")`)

// Reason shortens a replay error to its message: the replayer reports a
// failed replay as the whole failure, stack trace included.
func Reason(err error) string {
	if err == nil {
		return ""
	}
	s := err.Error()
	if m := failureMessage.FindStringSubmatch(s); m != nil {
		if msg, uerr := strconv.Unquote(m[1]); uerr == nil {
			return msg
		}
	}
	if i := strings.Index(s, "\n"); i >= 0 {
		s = s[:i]
	}
	return s
}
