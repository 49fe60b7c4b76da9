// Command llmsim serves the LLM failure simulator: OpenAI's chat
// completions and Anthropic's Messages API.
//
//	llmsim --addr 127.0.0.1:8000 --scenario mixed
//
// --help lists every fault, the in-prompt directive syntax and the shipped
// scenarios. SIGINT or SIGTERM shuts it down cleanly.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/durable-llm/durable-llm/internal/logging"
	"github.com/durable-llm/durable-llm/llmsim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr, nil); err != nil {
		fmt.Fprintln(os.Stderr, "llmsim:", err)
		os.Exit(1)
	}
}

// run parses args, serves until ctx ends, and shuts down. ready, when set,
// is called with the listening address.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, ready func(net.Addr)) error {
	fs := flag.NewFlagSet("llmsim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8000", "listen address")
	scenario := fs.String("scenario", "healthy", "scenario file (.yaml or .json) or built-in name")
	level := fs.String("log-level", "info", "debug, info (one line per request), warn or error")
	ttft := fs.Duration("ttft", 0, "time to first token of every model, overriding the scenario (e.g. 300ms; 0s: at once)")
	tps := fs.Float64("tokens-per-second", 0, "decode speed of every model, overriding the scenario (e.g. 40)")
	instant := fs.Bool("instant", false, "every model answers at once: time to first token and per-token time 0")
	keepGens := fs.Int("keep-generations", 0, "generations kept for GET /stats?generations=1 (0: 1000, negative: none)")
	models := fs.String("models", os.Getenv("LLMSIM_MODELS"), "serve these model names instead of the scenario's, comma-separated (e.g. gpt-4o,gpt-4o-mini): the i-th takes the scenario's i-th model and its faults (env LLMSIM_MODELS)")
	fs.Usage = func() { usage(stdout, fs) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	logger, flush, err := logging.New(logging.Options{Level: *level, Out: stderr, EveryLine: true})
	if err != nil {
		return err
	}
	defer flush()
	sc, err := llmsim.OpenScenario(*scenario)
	if err != nil {
		return err
	}
	if *models != "" {
		var names []string
		for _, n := range strings.Split(*models, ",") {
			if n = strings.TrimSpace(n); n == "" {
				return fmt.Errorf("--models: an empty name in %q (want names separated by commas)", *models)
			}
			names = append(names, n)
		}
		if err := sc.RenameModels(names); err != nil {
			return fmt.Errorf("--models: %w", err)
		}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *tps < 0 {
		return fmt.Errorf("--tokens-per-second must be positive, got %v", *tps)
	}
	if set["ttft"] || set["tokens-per-second"] || *instant {
		if err := overrideGeneration(sc, set["ttft"], *ttft, *tps, *instant); err != nil {
			return err
		}
	}
	sim, err := llmsim.New(llmsim.Options{Scenario: sc, KeepGenerations: *keepGens, OnRequest: func(r llmsim.Record) {
		logger.Info("request", "wire", r.Wire, "model", r.Model, "outcome", r.Outcome, "fault", r.Fault, "source", r.Source,
			"phase", r.Phase, "attempt", r.Attempt, "conversation", r.Conversation, "request_id", r.RequestID,
			"stream", r.Stream, "prompt_tokens", r.PromptTokens, "completion_tokens", r.CompletionTokens,
			"continuation", r.Continuation, "queued_ms", r.Queued.Milliseconds(),
			"ttft_ms", r.FirstToken.Milliseconds(), "duration_ms", r.Duration.Milliseconds())
	}})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: sim, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	logger.Warn("llmsim listening", "base_url", "http://"+ln.Addr().String()+"/v1", "scenario", sc.Name,
		"stats", "http://"+ln.Addr().String()+"/stats")
	if ready != nil {
		ready(ln.Addr())
	}
	select {
	case <-ctx.Done():
	case err := <-errc:
		return err
	}
	logger.Warn("llmsim shutting down")
	sim.Close()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	return nil
}

// overrideGeneration sets the generation speed of every model of sc (the
// default models when it lists none): the time to first token when
// setTTFT, the tokens per second when tps > 0, or both to 0 when instant.
func overrideGeneration(sc *llmsim.Scenario, setTTFT bool, ttft time.Duration, tps float64, instant bool) error {
	models := append([]llmsim.ModelSpec(nil), sc.Models...)
	if len(models) == 0 {
		models = llmsim.DefaultModels()
	}
	for i := range models {
		m := &models[i]
		if setTTFT || instant {
			l := llmsim.Fixed(ttft)
			if instant {
				l = llmsim.Latency{}
			}
			m.TTFT, m.Latency = &l, llmsim.Latency{}
		}
		switch {
		case instant:
			m.ITL, m.TokensPerSecond = new(llmsim.Duration), 0
		case tps > 0:
			m.ITL, m.TokensPerSecond = nil, tps
		}
	}
	sc.Models = models
	return sc.Validate()
}

func usage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, `llmsim — an OpenAI- and Anthropic-compatible LLM simulator that injects every failure.

Usage: llmsim [--addr 127.0.0.1:8000] [--scenario FILE|NAME] [--log-level info]
              [--ttft 300ms] [--tokens-per-second 40] [--instant]
              [--keep-generations 1000]

Endpoints: POST /v1/chat/completions (stream too), POST /v1/messages
(Anthropic's Messages API, stream too; its SDK's base URL is the server's
root), GET /v1/models, GET /stats
(?generations=1&conversation=KEY: what each answer generated and sent),
POST /stats/reset, GET|POST /admin/scenario (?name=NAME or a YAML/JSON body),
POST /admin/reset, GET /healthz.

Flags:
`)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprint(w, "\nFaults (scenario phases' faults[].kind, or fault= in a directive):\n\n")
	fmt.Fprint(w, indent(llmsim.FormatFaultTable()))
	fmt.Fprint(w, `
In-prompt directive (in the last user message; applies to the first k
attempts of the conversation, optionally only on model m):

  [[sim fault=rate_limited times=2 model=qwen-72b retry_after=2s]]
  [[sim tokens=800 fault=cut_stream after=100]]
  attributes: fault times(k|always) model retry_after retry_after_ms
              retry_header(seconds|ms|both|date|none) latency status chunks
              duration window after tokens(answer length, every attempt)

Generation: the first token after the model's ttft (default ~300ms), then
tokens_per_second (default 40); a non-streamed answer arrives whole at the
end. Continuation of the last assistant message: continue_final_message:
true + add_generation_prompt: false (vLLM) or prefix: true on it (DeepSeek).

Built-in scenarios (--scenario NAME):

`)
	for _, name := range llmsim.BuiltinScenarios() {
		desc := ""
		if sc, err := llmsim.BuiltinScenario(name); err == nil {
			desc = sc.Description
		}
		if i := strings.Index(desc, ". "); i > 0 {
			desc = desc[:i]
		}
		fmt.Fprintf(w, "  %-32s %s\n", name, desc)
	}
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ") + "\n"
}
