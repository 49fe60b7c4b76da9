// Command starter is durable-llm's command-line interface: everything a
// client or an operator runs, one subcommand each, every one a thin layer
// of flags and environment over a library package:
//
//	starter ask [flags] "question"   start (or attach to) a call, wait (or --stream), print the answer (llmclient)
//	starter show <workflow id>       a call's answer and attempt table, from its history (llmclient)
//	starter replay FILE… | --query Q replay histories against this build (replay)
//	starter codec-server [flags]     /encode and /decode for the Web UI and CLI (codec)
//	starter serve [flags]            the OpenAI-compatible HTTP front door (frontdoor)
//	starter usage [--since 24h]      tokens and estimated cost per tenant and model (store)
//	starter doctor [--probe]         what stands between this machine and a first call (starter/internal/doctor)
//	starter feedback <id> <outcome>  what the user did after a call, for the rules' learner (llmclient)
//	starter rules [--scenario S]     each rule's precision and state, by scenario (llmclient)
//	starter review list|approve|reject  the risk reviews' queue (workflows.RiskReview)
//
// The worker is the other command (./worker, over package llmworker).
// Temporal connection settings come from Temporal's standard environment
// (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, …). Only serve logs (through
// internal/logging); ask and show print their results and discard the
// Temporal SDK's log.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	"go.temporal.io/sdk/log"

	"github.com/durable-llm/durable-llm/codec"
	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/workflows"
)

const usage = `usage: starter <command> [flags]

commands:
  ask [flags] "question"   start (or attach to) a durable LLM call, wait (or --stream), print the answer
  show <workflow id>       print a call's answer and attempt table from its history
  replay FILE… | --query Q replay histories against this build; exit 1 at the first non-determinism
  codec-server [flags]     serve /encode and /decode for the Web UI and CLI (keys from LLM_PAYLOAD_KEYS)
  serve [flags]            serve the OpenAI-compatible front door (POST /v1/chat/completions, GET /v1/models)
  usage [--since 24h]      print tokens and estimated cost per tenant and model (store.kind postgres)
  doctor [--probe]         check Temporal, search attributes, workers, endpoints, models and keys
  feedback <id> <outcome>  tell the rules' learner what the user did after a call (resolved|abandoned|handoff_requested|complaint)
  rules [--scenario S]     print each rule's precision, state and feedback counts, by scenario
  review list|approve|reject  the risk reviews business rules started: list them, decide one

Run "starter <command> -h" for the flags of a command.
`

func main() {
	// SIGTERM as Ctrl-C: docker stop, Kubernetes and systemd stop a front
	// door with it, and it must drain, not drop its connections.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "starter:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	err := dispatch(ctx, args, out)
	if errors.Is(err, flag.ErrHelp) {
		return nil // "starter ask -h": the flags were printed, as asked
	}
	return err
}

// dispatch runs the command args name.
func dispatch(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return errors.New("a command is required")
	}
	switch args[0] {
	case "ask":
		return ask(ctx, args[1:], out)
	case "show":
		return show(ctx, args[1:], out)
	case "replay":
		return replayCmd(ctx, args[1:], out)
	case "codec-server":
		return codecServer(ctx, args[1:], out)
	case "serve":
		return serve(ctx, args[1:], out)
	case "usage":
		return usageCmd(ctx, args[1:], out)
	case "doctor":
		return doctorCmd(ctx, args[1:], out)
	case "feedback":
		return feedbackCmd(ctx, args[1:], out)
	case "rules":
		return rulesCmd(ctx, args[1:], out)
	case "review":
		return reviewCmd(ctx, args[1:], out)
	case "-h", "--help", "help":
		fmt.Fprint(out, usage)
		return nil
	}
	fmt.Fprint(os.Stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}

// dialWithin is dial with ctx bounded by d, for a command's requests;
// done closes both.
func dialWithin(ctx context.Context, d time.Duration) (*llmclient.Client, context.Context, func(), error) {
	lc, closeFn, err := dial()
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	return lc, ctx, func() { cancel(); closeFn() }, nil
}

// dial connects to Temporal and returns the client of calls, with the
// deployment's workflow ID secret (LLM_ID_SECRET) when it is set.
func dial() (*llmclient.Client, func(), error) {
	ids, err := request.IDsFromEnv(os.Getenv)
	if err != nil {
		return nil, nil, err
	}
	opts, err := envconfig.LoadDefaultClientOptions()
	if err != nil {
		return nil, nil, fmt.Errorf("temporal client settings: %w", err)
	}
	if _, err := codec.ConfigureClient(&opts, os.Getenv); err != nil { // payload encryption, when keys are set
		return nil, nil, err
	}
	opts.Logger = log.NewStructuredLogger(slog.New(slog.DiscardHandler))
	c, err := client.Dial(opts)
	if err != nil {
		addr := opts.HostPort
		if addr == "" {
			addr = client.DefaultHostPort
		}
		return nil, nil, fmt.Errorf("cannot reach Temporal at %s (is `make run` running? set TEMPORAL_ADDRESS): %w", addr, err)
	}
	return &llmclient.Client{Temporal: c, Namespace: opts.Namespace, UIBase: os.Getenv("TEMPORAL_UI"), IDs: ids}, c.Close, nil
}

func ask(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("ask", flag.ContinueOnError)
	user := fs.String("user", "u-demo", "user ID (part of the idempotency key)")
	session := fs.String("session", "s-demo", "session ID (part of the idempotency key)")
	scenario := fs.String("scenario", "customer_service", "business scenario (selects business rules)")
	model := fs.String("model", "", "preferred model (default: the first of the ladder)")
	system := fs.String("system", "You are a helpful customer-service assistant.", "system prompt (empty: none)")
	maxTokens := fs.Int("max-tokens", 0, "max_tokens of the answer (0: the policy's limits.default_max_tokens, 4096 by default, within the model's context window)")
	deadline := fs.Duration("deadline", 0, "deadline of the whole call (0: the policy's, 60s)")
	key := fs.String("key", "", "idempotency key (default: derived from the whole request: user, session, scenario, model, messages, …)")
	policyFile := fs.String("policy", os.Getenv("POLICY_FILE"), "policy YAML file of the workers, for the default deadline (env POLICY_FILE; default: the embedded policy)")
	messages := fs.String("messages", "", "JSON file with the whole messages array (instead of --system and the question)")
	asJSON := fs.Bool("json", false, "print the CallResult as JSON (with --stream: a JSON line per stream item, then the result)")
	stream := fs.Bool("stream", false, "print the answer as it is generated, with the attempt events inline, then the summary")
	if err := fs.Parse(args); err != nil {
		return err
	}
	req := workflows.CallRequest{
		UserID: *user, SessionID: *session, Scenario: *scenario, Model: *model,
		MaxTokens: *maxTokens, DeadlineMS: deadline.Milliseconds(), IdempotencyKey: *key,
	}
	switch {
	case *messages != "":
		data, err := os.ReadFile(*messages)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(data, &req.Messages); err != nil {
			return fmt.Errorf("%s: not a JSON array of messages: %w", *messages, err)
		}
	case fs.NArg() == 0:
		return errors.New(`ask: a question is required, e.g. starter ask "where is my order?"`)
	default:
		if *system != "" {
			req.Messages = append(req.Messages, request.Message{Role: request.RoleSystem, Content: *system})
		}
		q := fs.Arg(0)
		for _, more := range fs.Args()[1:] {
			q += " " + more
		}
		req.Messages = append(req.Messages, request.Message{Role: request.RoleUser, Content: q})
	}

	cfg, err := config.LoadConfigOrDefault(*policyFile)
	if err != nil {
		return err // names the file, the field and what is expected
	}
	lc, closeFn, err := dial()
	if err != nil {
		return err
	}
	defer closeFn()
	// The workers' default deadline and limits: a call's execution timeout
	// is its deadline plus a margin.
	lc.Deadline, lc.Limits = cfg.Call.Deadline.D(), cfg.Limits
	if *stream {
		return askStream(ctx, lc, req, *asJSON, out)
	}
	run, err := lc.Start(ctx, req)
	if err != nil {
		return err
	}
	if !*asJSON {
		fmt.Fprintf(os.Stderr, "call %s started; waiting…\n", run.GetID())
	}
	var res workflows.CallResult
	if err := run.Get(ctx, &res); err != nil {
		return fmt.Errorf("call %s failed: %w\n  see %s", run.GetID(), err, lc.UILink(run.GetID()))
	}
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	if err := llmclient.WriteReport(out, res); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nWeb UI:   %s\n", lc.UILink(run.GetID()))
	return nil
}

func show(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("show", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print the CallResult as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("show: exactly one workflow ID is required")
	}
	id := fs.Arg(0)
	lc, qctx, done, err := dialWithin(ctx, 10*time.Second)
	if err != nil {
		return err
	}
	defer done()
	desc, err := lc.Temporal.DescribeWorkflowExecution(qctx, id, "")
	if err != nil {
		return fmt.Errorf("show %s: %w", id, err)
	}
	var res workflows.CallResult
	if desc.GetWorkflowExecutionInfo().GetCloseTime() == nil {
		res, err = lc.State(qctx, id)
		fmt.Fprintln(out, "(still running)")
	} else {
		res, err = lc.Result(qctx, id)
	}
	if err != nil && res.RequestID == "" {
		return fmt.Errorf("show %s: %w", id, err)
	}
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	if err != nil {
		fmt.Fprintf(out, "call failed: %v\n\n", err)
	}
	if err := llmclient.WriteReport(out, res); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nWeb UI:   %s\n", lc.UILink(id))
	return nil
}
