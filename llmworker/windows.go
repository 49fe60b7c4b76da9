package llmworker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/durable-llm/durable-llm/policies/config"
)

// WindowProbeTimeout bounds LearnWindows at the worker's start and in
// `starter doctor`: a server that does not answer in time keeps the
// assumed window.
const WindowProbeTimeout = 2 * time.Second

// WindowSource says where a model's context window came from.
type WindowSource string

const (
	// WindowPolicy: the policy sets it (models[].context_window, or the
	// file's model_defaults).
	WindowPolicy WindowSource = "policy"
	// WindowServer: the server said the window requests get.
	WindowServer WindowSource = "server"
	// WindowBound: the server said only an upper bound (Ollama's trained
	// context of a model not loaded, llama.cpp's n_ctx_train); the window
	// used is the smaller of it and the assumed one.
	WindowBound WindowSource = "bound"
	// WindowAssumed: no one said it; model_defaults' value is used.
	WindowAssumed WindowSource = "assumed"
)

// Window is one model's context window as the worker prunes for it.
type Window struct {
	Model string
	// Tokens is the window prompts are pruned to.
	Tokens int
	Source WindowSource
	// From says where it came from, in words, with how to set it when it
	// is assumed.
	From string
}

// String is the window as start-up lines and the doctor say it.
func (w Window) String() string {
	return fmt.Sprintf("%s: %d tokens, %s", w.Model, w.Tokens, w.From)
}

// assumedHint says how to set a window the server does not say.
const assumedHint = "set models[].context_window in a policy file; LLM_MODELS carries names only"

// LearnWindows asks the servers of the models whose window the policy
// does not set (config.ModelConfig.WindowAssumed) for the window they
// serve, all at once and within timeout in all, and returns every
// model's window and where it came from. It changes nothing (see
// ApplyWindows). Where a server is unreachable or does not say, the
// assumed window stands, and From says so.
//
// It asks at a model's base URL (…/v1) and at its root (without /v1):
// GET <base>/models (vLLM, llama.cpp; the only request that carries the
// model's key, as a call sends it), GET <root>/props (llama.cpp), GET
// <root>/api/ps and POST <root>/api/show (Ollama); docs/policy.md names
// the fields read. Ollama says its default context only once the model is
// loaded, so a model that is neither loaded nor given num_ctx has only an
// upper bound, its trained context.
func LearnWindows(ctx context.Context, cfg *config.Config, getenv func(string) string, timeout time.Duration) []Window {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	p := &prober{hc: &http.Client{Timeout: timeout}, getenv: getenv, got: map[string]*fetched{}}
	out := make([]Window, len(cfg.Models))
	var wg sync.WaitGroup
	for i, m := range cfg.Models {
		if !m.WindowAssumed {
			out[i] = Window{Model: m.Name, Tokens: m.ContextWindow, Source: WindowPolicy, From: "set by the policy"}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = p.model(ctx, m)
		}()
	}
	wg.Wait()
	return out
}

// ApplyWindows sets the window of each model the server told (a bound
// included) in cfg, for pruning.
func ApplyWindows(cfg *config.Config, ws []Window) {
	for _, w := range ws {
		if w.Source != WindowServer && w.Source != WindowBound {
			continue
		}
		for i := range cfg.Models {
			if cfg.Models[i].Name == w.Model && w.Tokens > 0 {
				cfg.Models[i].ContextWindow = w.Tokens
				cfg.Models[i].WindowAssumed = false
			}
		}
	}
}

// prober makes each request once, whichever models need its answer.
type prober struct {
	hc     *http.Client
	getenv func(string) string
	mu     sync.Mutex
	got    map[string]*fetched
}

type fetched struct {
	done chan struct{}
	body []byte
	err  error
}

// said is what one endpoint said of one model's window.
type said struct {
	tokens int
	bound  bool
	from   string
}

// model learns m's window: the smallest any of its endpoints (a
// deployment each, or its base URL) said; else the assumed one.
func (p *prober) model(ctx context.Context, m config.ModelConfig) Window {
	assumed := m.ContextWindow
	if m.Wire() == config.APIAnthropic {
		return Window{Model: m.Name, Tokens: assumed, Source: WindowAssumed,
			From: fmt.Sprintf("assumed %d: the Messages API does not tell a model's window; set context_window", assumed)}
	}
	var best *said
	seen := map[string]bool{}
	var why []string
	n := 0
	for _, k := range m.Keys() {
		mk := m.WithKey(k)
		if seen[mk.BaseURL+"\x00"+mk.APIKeyEnv] {
			continue
		}
		seen[mk.BaseURL+"\x00"+mk.APIKeyEnv] = true
		n++
		s, err := p.endpoint(ctx, mk, assumed)
		if err != nil {
			why = append(why, err.Error())
			continue
		}
		if best == nil || s.tokens < best.tokens || (s.tokens == best.tokens && best.bound && !s.bound) {
			best = &s
		}
	}
	if best == nil {
		return Window{Model: m.Name, Tokens: assumed, Source: WindowAssumed,
			From: fmt.Sprintf("assumed %d: %s; %s", assumed, strings.Join(why, "; "), assumedHint)}
	}
	w := Window{Model: m.Name, Tokens: best.tokens, Source: WindowServer, From: best.from}
	if best.bound {
		w.Source = WindowBound
	}
	if n > 1 {
		w.From += fmt.Sprintf(" (the smallest of its %d endpoints)", n)
	}
	return w
}

// endpoint asks the server of mk (a model with one base URL and key)
// for the window of the model, or says why it could not tell.
func (p *prober) endpoint(ctx context.Context, mk config.ModelConfig, assumed int) (said, error) {
	base := strings.TrimRight(mk.BaseURL, "/")
	root := strings.TrimSuffix(base, "/v1")
	key := ""
	if mk.APIKeyEnv != "" {
		key = p.getenv(mk.APIKeyEnv)
	}
	show, _ := json.Marshal(map[string]string{"model": mk.Name})
	var (
		wg                         sync.WaitGroup
		models, props, ps, details []byte
		modelsErr                  error
	)
	wg.Add(4)
	go func() {
		defer wg.Done()
		models, modelsErr = p.fetch(ctx, http.MethodGet, base+"/models", nil, mk.APIKeyEnv, key)
	}()
	go func() { defer wg.Done(); props, _ = p.fetch(ctx, http.MethodGet, root+"/props", nil, "", "") }()
	go func() { defer wg.Done(); ps, _ = p.fetch(ctx, http.MethodGet, root+"/api/ps", nil, "", "") }()
	go func() {
		defer wg.Done()
		details, _ = p.fetch(ctx, http.MethodPost, root+"/api/show", show, "", "")
	}()
	wg.Wait()

	// vLLM: the longest sequence it serves (prompt and answer).
	var list struct {
		Data []struct {
			ID          string `json:"id"`
			MaxModelLen int    `json:"max_model_len"`
			Meta        struct {
				NCtxTrain int `json:"n_ctx_train"`
			} `json:"meta"`
		} `json:"data"`
	}
	_ = json.Unmarshal(models, &list)
	trainedMeta := 0
	for _, d := range list.Data {
		if !Offers([]string{d.ID}, mk.Name) && d.ID != mk.Name {
			continue
		}
		if d.MaxModelLen > 0 {
			return said{tokens: d.MaxModelLen, from: "from the server's /models (max_model_len)"}, nil
		}
		trainedMeta = d.Meta.NCtxTrain
	}

	// Ollama: the window of the loaded model, else num_ctx, else only
	// the trained context as an upper bound.
	var running struct {
		Models []struct {
			Name          string `json:"name"`
			Model         string `json:"model"`
			ContextLength int    `json:"context_length"`
		} `json:"models"`
	}
	_ = json.Unmarshal(ps, &running)
	for _, r := range running.Models {
		if (Offers([]string{r.Name}, mk.Name) || Offers([]string{r.Model}, mk.Name)) && r.ContextLength > 0 {
			return said{tokens: r.ContextLength, from: "from the server's /api/ps (the loaded model's context_length)"}, nil
		}
	}
	numCtx, trained := ollamaShow(details)
	switch {
	case numCtx > 0 && trained > 0:
		return said{tokens: min(numCtx, trained), from: fmt.Sprintf("from the server's /api/show (num_ctx %d, trained context %d)", numCtx, trained)}, nil
	case numCtx > 0:
		return said{tokens: numCtx, from: "from the server's /api/show (num_ctx)"}, nil
	}

	// llama.cpp: the context of a slot.
	var settings struct {
		Default struct {
			NCtx int `json:"n_ctx"`
		} `json:"default_generation_settings"`
	}
	if json.Unmarshal(props, &settings) == nil && settings.Default.NCtx > 0 {
		return said{tokens: settings.Default.NCtx, from: "from the server's /props (n_ctx)"}, nil
	}

	if trained > 0 {
		return said{tokens: min(assumed, trained), bound: true, from: fmt.Sprintf(
			"at most %d, the trained context in the server's /api/show: Ollama's default context (OLLAMA_CONTEXT_LENGTH) is not said until the model is loaded; "+
				"%s, or PARAMETER num_ctx in the Modelfile", trained, assumedHint)}, nil
	}
	if trainedMeta > 0 {
		return said{tokens: min(assumed, trainedMeta), bound: true, from: fmt.Sprintf(
			"at most %d, the trained context in the server's /models (n_ctx_train); %s", trainedMeta, assumedHint)}, nil
	}
	if modelsErr != nil {
		return said{}, fmt.Errorf("%s could not be asked (%v)", config.RedactURL(mk.BaseURL), modelsErr)
	}
	return said{}, fmt.Errorf("%s does not say it (asked /models, /props, /api/ps, /api/show)", config.RedactURL(mk.BaseURL))
}

// ollamaShow reads /api/show's answer: the num_ctx parameter and the
// trained context of the model's architecture (0 when not said).
func ollamaShow(body []byte) (numCtx, trained int) {
	var show struct {
		Parameters string         `json:"parameters"`
		ModelInfo  map[string]any `json:"model_info"`
	}
	if json.Unmarshal(body, &show) != nil {
		return 0, 0
	}
	for _, line := range strings.Split(show.Parameters, "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "num_ctx" {
			numCtx, _ = strconv.Atoi(f[1])
		}
	}
	if arch, ok := show.ModelInfo["general.architecture"].(string); ok {
		if n, ok := show.ModelInfo[arch+".context_length"].(float64); ok && n > 0 {
			trained = int(n)
		}
	}
	return numCtx, trained
}

// maxProbeBody bounds an answer read (Ollama's /api/show carries the
// Modelfile, template and license).
const maxProbeBody = 4 << 20

// fetch makes a request once (by method, URL, body and key variable) and
// returns the body of a 2xx answer. The key, when not empty, is sent as
// a call sends it; errors never quote the URL (it may hold a secret).
func (p *prober) fetch(ctx context.Context, method, u string, body []byte, keyEnv, key string) ([]byte, error) {
	id := method + " " + u + "\x00" + string(body) + "\x00" + keyEnv
	p.mu.Lock()
	f, ok := p.got[id]
	if !ok {
		f = &fetched{done: make(chan struct{})}
		p.got[id] = f
	}
	p.mu.Unlock()
	if ok {
		select {
		case <-f.done:
			return f.body, f.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	defer close(f.done)
	f.body, f.err = p.do(ctx, method, u, body, key)
	return f.body, f.err
}

func (p *prober) do(ctx context.Context, method, u string, body []byte, key string) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, errors.New("not a URL")
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			return nil, ue.Err
		}
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxProbeBody))
		return nil, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return io.ReadAll(io.LimitReader(resp.Body, maxProbeBody))
}
