package realllm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Version is the Ollama release `make ollama` builds.
const Version = "0.17.4"

const (
	// BinaryEnv names the Ollama binary (make test sets it to bin/ollama).
	BinaryEnv = "DURABLE_LLM_OLLAMA"
	// RequireEnv, set to 1 (as CI does), turns a missing binary into a
	// failure instead of a skip.
	RequireEnv = "DURABLE_LLM_REQUIRE_REALLLM"
)

// ErrNotBuilt: the Ollama binary is not there.
var ErrNotBuilt = errors.New("the Ollama binary is not built: run `make ollama`")

// Binary finds Ollama: $DURABLE_LLM_OLLAMA, else bin/ollama at the module
// root above the working directory.
func Binary() (string, error) {
	if p := os.Getenv(BinaryEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%w (%s=%s: %v)", ErrNotBuilt, BinaryEnv, p, err)
		}
		return p, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			p := filepath.Join(dir, "bin", "ollama")
			if _, err := os.Stat(p); err != nil {
				return "", fmt.Errorf("%w (looked for %s)", ErrNotBuilt, p)
			}
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("%w (no go.mod above the working directory; or set %s)", ErrNotBuilt, BinaryEnv)
		}
		dir = parent
	}
}

// Model is one model the server serves.
type Model struct {
	// Name as requests name it (Ollama lists it as Name:latest).
	Name string
	// Weights shape the GGUF file.
	Weights ModelOptions
	// NumPredict is the server's own token limit for a request that sets
	// none (the Modelfile's num_predict; 0: Ollama's default, no limit).
	NumPredict int
}

// The models of the tests. Both end a request without max_tokens at the
// server's own limit of 128 tokens, as many Modelfiles do.
var (
	// Tiny never ends its answer by itself: it stops at a token limit
	// (finish_reason "length").
	Tiny = Model{Name: "tiny", NumPredict: 128}
	// TinyEOS ends its answers by itself (finish_reason "stop"), after a
	// printable character: in 40 answers, after 3 to 607 tokens (median
	// about 60), a third of them longer than the server's limit.
	TinyEOS = Model{Name: "tiny-eos", Weights: ModelOptions{EOSLogit: 4}, NumPredict: 128}
)

// Options tune Start; the zero value is one slot and models Tiny and
// TinyEOS.
type Options struct {
	// Models served (default Tiny and TinyEOS), loaded before Start
	// returns.
	Models []Model
	// NumParallel is how many requests a model generates at once
	// (OLLAMA_NUM_PARALLEL; default 1). Others wait for a slot.
	NumParallel int
	// MaxQueue bounds the requests waiting for a model that is not loaded
	// (OLLAMA_MAX_QUEUE; default Ollama's, 512).
	MaxQueue int
	// ContextLength caps the context (OLLAMA_CONTEXT_LENGTH; default the
	// models' 2,048 tokens).
	ContextLength int
}

// Server is a running Ollama with the counting proxy in front of it.
type Server struct {
	// BaseURL is the OpenAI-compatible API through the proxy
	// (http://127.0.0.1:port/v1): point LLM_BASE_URL here.
	BaseURL string
	// DirectURL is Ollama's own address (http://127.0.0.1:port), not
	// counted.
	DirectURL string
	// Dir holds the models, the server's HOME and its log (server.log).
	Dir string

	cmd   *exec.Cmd
	done  chan struct{}
	proxy *httptest.Server
	mu    sync.Mutex
	reqs  []Request
}

// Request is one request the proxy forwarded.
type Request struct {
	Method, Path string
	// RequestID is its X-Request-ID header (the worker sends
	// "<workflow id>/<attempt>").
	RequestID string
	// Model, Stream and MaxTokens are read from a JSON body (MaxTokens:
	// max_tokens, else max_completion_tokens; nil when neither is set).
	Model     string
	Stream    bool
	MaxTokens *int
	// Status is the server's HTTP status (0 until its headers came, or
	// when the client gave up first; 502: the server could not be reached).
	Status int
	// Start is when the request came, End when the proxy had passed on
	// all of the answer (zero until then).
	Start, End time.Time
}

// WorkflowID is the workflow part of RequestID ("" without one).
func (r Request) WorkflowID() string {
	id, _, _ := strings.Cut(r.RequestID, "/")
	return id
}

// Start starts Ollama for the test and stops it when the test ends. It
// skips the test in -short mode, and when the binary is not built unless
// RequireEnv is 1 or CI is set (then the test fails).
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: runs a real LLM server (skipped in -short mode)")
	}
	bin, err := Binary()
	if err != nil {
		if os.Getenv(RequireEnv) == "1" || os.Getenv("CI") != "" {
			t.Fatalf("%v (%s=1 or CI set: a missing real LLM server fails the test)", err, RequireEnv)
		}
		t.Skipf("real LLM server test skipped: %v", err)
	}
	s, err := start(bin, t.TempDir(), o)
	if s != nil {
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("Ollama's log (%s), last lines:\n%s", filepath.Join(s.Dir, "server.log"), s.LogTail(40))
			}
			s.Stop()
		})
	}
	if err != nil {
		t.Fatalf("start the real LLM server: %v", err)
	}
	return s
}

func start(bin, dir string, o Options) (*Server, error) {
	if len(o.Models) == 0 {
		o.Models = []Model{Tiny, TinyEOS}
	}
	if o.NumParallel == 0 {
		o.NumParallel = 1
	}
	for _, m := range o.Models {
		if err := writeModelFiles(dir, m); err != nil {
			return nil, err
		}
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	host := "127.0.0.1:" + port
	env := append(os.Environ(),
		"OLLAMA_HOST="+host,
		"OLLAMA_MODELS="+filepath.Join(dir, "models"),
		"HOME="+dir, // ollama serve writes its key pair under ~/.ollama
		"OLLAMA_NUM_PARALLEL="+strconv.Itoa(o.NumParallel),
		"OLLAMA_KEEP_ALIVE=1h", // no unload in the middle of a test
		"OLLAMA_NOPRUNE=1",
		"OLLAMA_NO_CLOUD=1",
		"GIN_MODE=release",
	)
	if o.MaxQueue > 0 {
		env = append(env, "OLLAMA_MAX_QUEUE="+strconv.Itoa(o.MaxQueue))
	}
	if o.ContextLength > 0 {
		env = append(env, "OLLAMA_CONTEXT_LENGTH="+strconv.Itoa(o.ContextLength))
	}
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child holds its own descriptor
	cmd := exec.Command(bin, "serve")
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, logf, logf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s serve: %w", bin, err)
	}
	s := &Server{DirectURL: "http://" + host, Dir: dir, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.done) }()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := s.waitUp(ctx); err != nil {
		return s, err
	}
	for _, m := range o.Models {
		create := exec.CommandContext(ctx, bin, "create", m.Name, "-f", filepath.Join(dir, m.Name+".Modelfile"))
		create.Dir, create.Env = dir, env
		if out, err := create.CombinedOutput(); err != nil {
			return s, fmt.Errorf("ollama create %s: %w: %s", m.Name, err, lastLine(out))
		}
	}
	for _, m := range o.Models {
		// Load every model now, so that a test's first request does not
		// wait for the load (and OLLAMA_MAX_QUEUE only applies to loads).
		if err := s.generate(ctx, m.Name); err != nil {
			return s, fmt.Errorf("load %s: %w", m.Name, err)
		}
	}
	target, _ := url.Parse(s.DirectURL)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1 // stream every token as it comes
	rp.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		if r.Context().Err() == nil { // else the client is gone: no one to answer
			w.WriteHeader(http.StatusBadGateway)
		}
	}
	s.proxy = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.forward(rp, w, r)
	}))
	s.BaseURL = s.proxy.URL + "/v1"
	return s, nil
}

// modelfileTemplate is the chat template of the models: a Go template
// that renders system prompt, tools, turns and tool calls (Ollama accepts
// tools only from a template that uses .Tools).
const modelfileTemplate = `TEMPLATE """
{{- if or .System .Tools }}<|system|>
{{- if .System }}
{{ .System }}
{{- end }}
{{- if .Tools }}
Tools:
{{- range .Tools }}
{{ . }}
{{- end }}
To call a tool reply with <tool_call>{"name": <name>, "arguments": <args>}</tool_call>
{{- end }}
{{ end }}
{{- range $i, $_ := .Messages }}
{{- $last := eq (len (slice $.Messages $i)) 1 }}
{{- if eq .Role "user" }}<|user|>
{{ .Content }}
{{ else if eq .Role "assistant" }}<|assistant|>
{{ if .Content }}{{ .Content }}{{ end }}
{{- if .ToolCalls }}{{ range .ToolCalls }}<tool_call>{"name": "{{ .Function.Name }}", "arguments": {{ .Function.Arguments }}}</tool_call>{{ end }}{{ end }}
{{- if not $last }}</s>
{{ end }}
{{ else if eq .Role "tool" }}<|tool|>
{{ .Content }}
{{ end }}
{{- if and (ne .Role "assistant") $last }}<|assistant|>
{{ end }}
{{- end }}"""
`

func writeModelFiles(dir string, m Model) error {
	gguf := m.Name + ".gguf"
	if err := WriteModelFile(filepath.Join(dir, gguf), m.Weights); err != nil {
		return err
	}
	// One thread: the model is too small to gain from more, and threads
	// that wait for each other on a busy machine cut the rate from
	// thousands of tokens per second to tens.
	mf := "FROM ./" + gguf + "\n" + modelfileTemplate + "PARAMETER num_thread 1\n"
	if m.NumPredict > 0 {
		mf += fmt.Sprintf("PARAMETER num_predict %d\n", m.NumPredict)
	}
	return os.WriteFile(filepath.Join(dir, m.Name+".Modelfile"), []byte(mf), 0o644)
}

func (s *Server) waitUp(ctx context.Context) error {
	for {
		resp, err := http.Get(s.DirectURL + "/api/version")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-s.done:
			return fmt.Errorf("ollama serve exited: %s", s.LogTail(5))
		case <-ctx.Done():
			return fmt.Errorf("ollama serve does not answer on %s: %v", s.DirectURL, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// generate asks model for one token on the native API.
func (s *Server) generate(ctx context.Context, model string) error {
	body, _ := json.Marshal(map[string]any{"model": model, "prompt": "hi", "stream": false, "options": map[string]any{"num_predict": 1}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.DirectURL+"/api/generate", bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, b)
	}
	return nil
}

// forward records the request and passes it to Ollama.
func (s *Server) forward(rp *httputil.ReverseProxy, w http.ResponseWriter, r *http.Request) {
	rec := Request{Method: r.Method, Path: r.URL.Path, RequestID: r.Header.Get("X-Request-ID"), Start: time.Now()}
	if r.Body != nil && r.Method == http.MethodPost {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		var body struct {
			Model               string `json:"model"`
			Stream              bool   `json:"stream"`
			MaxTokens           *int   `json:"max_tokens"`
			MaxCompletionTokens *int   `json:"max_completion_tokens"`
		}
		if json.Unmarshal(b, &body) == nil {
			rec.Model, rec.Stream, rec.MaxTokens = body.Model, body.Stream, body.MaxTokens
			if rec.MaxTokens == nil {
				rec.MaxTokens = body.MaxCompletionTokens
			}
		}
	}
	// Recorded on arrival, the status when it comes: a client may have
	// its answer (and the test look) before the proxy's handler returns.
	s.mu.Lock()
	i := len(s.reqs)
	s.reqs = append(s.reqs, rec)
	s.mu.Unlock()
	rp.ServeHTTP(&statusWriter{ResponseWriter: w, set: func(code int) {
		s.mu.Lock()
		s.reqs[i].Status = code
		s.mu.Unlock()
	}}, r)
	s.mu.Lock()
	s.reqs[i].End = time.Now()
	s.mu.Unlock()
}

// statusWriter reports the status as it is sent; it flushes, so SSE
// passes through.
type statusWriter struct {
	http.ResponseWriter
	set func(int)
}

func (w *statusWriter) WriteHeader(code int) {
	w.set(code)
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Requests are the requests the proxy forwarded, in the order they came.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Completions are the chat completion requests made for a workflow (by
// their X-Request-ID), in the order they came.
func (s *Server) Completions(workflowID string) []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Path == "/v1/chat/completions" && r.WorkflowID() == workflowID {
			out = append(out, r)
		}
	}
	return out
}

// MaxInFlight is the most of reqs that were open at the same time (a
// request not ended yet is open).
func MaxInFlight(reqs []Request) int {
	most := 0
	for _, a := range reqs {
		n := 0
		for _, b := range reqs {
			if !b.Start.After(a.Start) && (b.End.IsZero() || b.End.After(a.Start)) {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}

// LogTail is the last n lines of the server's log.
func (s *Server) LogTail(n int) string {
	f, err := os.Open(filepath.Join(s.Dir, "server.log"))
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// Stop stops the proxy and the server (and the runners it started).
func (s *Server) Stop() {
	if s.proxy != nil {
		s.proxy.Close()
	}
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	terminate(s.cmd.Process)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		kill(s.cmd.Process)
		<-s.done
	}
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	_, port, err := net.SplitHostPort(l.Addr().String())
	return port, err
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}
