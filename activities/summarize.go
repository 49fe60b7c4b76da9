package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"go.temporal.io/sdk/activity"

	"github.com/durable-llm/durable-llm/policies/config"
	promptpkg "github.com/durable-llm/durable-llm/policies/prompt"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/store"
)

// SummarizeInput asks the context refiner for a summary of the rounds an
// attempt that keeps only the newest Keep rounds of Request drops.
type SummarizeInput struct {
	Request request.Request `json:"request"`
	Keep    int             `json:"keep"`
	// Attempt numbers the summary's request ID (<workflow id>/<n>s).
	Attempt int `json:"attempt"`
}

// Summary is the context refiner's answer: Text stands for
// Request.Messages[From:To] (Rounds whole rounds); Text is empty when no
// summary could be had, and Reason says why (the attempt then drops the
// rounds without one).
type Summary struct {
	Text   string `json:"text,omitempty"`
	Model  string `json:"model,omitempty"`
	From   int    `json:"from,omitempty"`
	To     int    `json:"to,omitempty"`
	Rounds int    `json:"rounds,omitempty"`
	// Cached: the session's summary of an earlier call, reused without a
	// request (it may cover fewer rounds than the attempt drops: the rest
	// are sent as they are).
	Cached bool `json:"cached,omitempty"`
	// DroppedTokens are the prompt tokens of the messages the summary
	// replaces, SummaryTokens those of the summary message.
	DroppedTokens int `json:"dropped_tokens,omitempty"`
	SummaryTokens int `json:"summary_tokens,omitempty"`
	// PromptTokens and CompletionTokens are what the summary's request
	// cost (0 when cached).
	PromptTokens     int    `json:"prompt_tokens,omitempty"`
	CompletionTokens int    `json:"completion_tokens,omitempty"`
	Reason           string `json:"reason"`
}

// summaryInstruction is the summarizer's system prompt.
const summaryInstruction = "Summarize the conversation below for another assistant that will not see it. " +
	"Keep every fact that was stated: names, numbers, dates, amounts, identifiers, addresses and decisions, " +
	"in plain sentences, without comments of your own. At most %d tokens."

// Summarize writes the summary of the rounds an attempt drops (README
// "Context refiner"): the session's summary when one covers them (no
// request), else pruning.summary's model is asked, in at most its
// max_tokens, and the request is paid from the model's endpoint retry
// budget. A new summary is kept for the session's next calls. A summary
// that cannot be had is no error: the attempt drops the rounds as
// prune_resend always did.
func (a *Activities) Summarize(ctx context.Context, in SummarizeInput) (Summary, error) {
	msgs := in.Request.Messages
	d := promptpkg.DroppedRounds(msgs, in.Keep)
	if d.Rounds == 0 {
		return Summary{Reason: "no rounds to summarize"}, nil
	}
	now := a.now()
	key := summaryKey(in.Request)
	if e, ok := a.summaries.get(ctx, key, now); ok && e.Covers > 0 && e.Covers <= d.To-d.From && e.Hash == hashMessages(msgs[d.From:d.From+e.Covers]) {
		s := Summary{Text: e.Text, Model: e.Model, From: d.From, To: d.From + e.Covers, Rounds: e.Rounds, Cached: true}
		s.Reason = fmt.Sprintf("the session's summary of %d round(s) by %s, written %s ago", e.Rounds, e.Model, now.Sub(e.At).Round(time.Second))
		return a.measured(s, msgs), nil
	}
	m, ok := a.cfg.SummaryModel()
	if !ok {
		return Summary{Reason: "no summary: the ladder has no model"}, nil
	}
	max := a.cfg.Pruning.Summary.MaxTokens
	instruction, transcript := fmt.Sprintf(summaryInstruction, max), promptpkg.Transcript(msgs[d.From:d.To])
	// The summary model is usually the ladder's smallest: rounds that
	// overflowed a larger model may not fit its window either, and a
	// request it must refuse would only cost budget and time.
	if need := a.tokens.Count(instruction) + a.tokens.Count(transcript) + max; m.ContextWindow > 0 && need > m.ContextWindow {
		return Summary{Model: m.Name, Reason: fmt.Sprintf("no summary: the %d dropped round(s) and the summary need %d tokens, over %s's context window (%d)",
			d.Rounds, need, m.Name, m.ContextWindow)}, nil
	}
	resp, m, why := a.sideRequest(ctx, m, in.Request.Tenant, fmt.Sprintf("%ds", in.Attempt), m.Timeout.D(), openai.ChatCompletionRequest{
		MaxTokens: max, Temperature: 1e-45,
		Messages: []openai.ChatCompletionMessage{
			{Role: openai.ChatMessageRoleSystem, Content: instruction},
			{Role: openai.ChatMessageRoleUser, Content: transcript},
		},
	})
	if why != "" {
		return Summary{Model: m.Name, Reason: "no summary: " + why}, nil
	}
	text := answerText(resp)
	if text == "" {
		return Summary{Model: m.Name, Reason: "no summary: " + m.Name + " answered no text"}, nil
	}
	s := Summary{Text: text, Model: m.Name, From: d.From, To: d.To, Rounds: d.Rounds,
		PromptTokens: resp.Usage.PromptTokens, CompletionTokens: resp.Usage.CompletionTokens}
	s.Reason = fmt.Sprintf("%s summarized %d round(s)", m.Name, d.Rounds)
	if resp.Usage.CompletionTokens == 0 {
		s.CompletionTokens = a.tokens.Count(text)
	}
	if err := a.summaries.put(ctx, key, summaryEntry{Covers: d.To - d.From, Hash: hashMessages(msgs[d.From:d.To]),
		Text: text, Model: m.Name, Rounds: d.Rounds, At: now}, in.Request.Tenant); err != nil {
		activity.GetLogger(ctx).Warn("shared summary cache write failed", "error", err)
	}
	return a.measured(s, msgs), nil
}

// measured fills the token counts of s: the messages it replaces and its
// own message.
func (a *Activities) measured(s Summary, msgs []request.Message) Summary {
	s.DroppedTokens = a.tokens.CountMessages(msgs[s.From:s.To])
	s.SummaryTokens = a.tokens.CountMessages([]request.Message{promptpkg.SummaryMessage(s.Text, s.Rounds, s.Model)})
	return s
}

// summaryKey is where a session's summary is kept: tenant and session
// ("" for a request without a session: not kept).
func summaryKey(r request.Request) string {
	if r.SessionID == "" {
		return ""
	}
	return "summary\x00" + r.Tenant + "\x00" + r.UserID + "\x00" + r.SessionID
}

// hashMessages identifies the messages a summary covers.
func hashMessages(msgs []request.Message) string {
	b, _ := json.Marshal(msgs)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// summaryEntry is a session's summary: it covers the Covers messages
// after the system part whose hash is Hash.
type summaryEntry struct {
	Covers int       `json:"covers"`
	Hash   string    `json:"hash"`
	Text   string    `json:"text"`
	Model  string    `json:"model"`
	Rounds int       `json:"rounds"`
	At     time.Time `json:"at"`
}

// summaryCache keeps each session's last summary in the worker (at most
// max, the least recently used dropped first, each for ttl) and, with a
// shared store, in the store for every worker (as an answer-cache row of
// its own key). Safe for concurrent use.
type summaryCache struct {
	shared SharedCache
	ttl    time.Duration
	max    int
	mem    *lru[summaryEntry] // this worker's
}

func newSummaryCache(cfg config.SummaryConfig, shared SharedCache) *summaryCache {
	return &summaryCache{shared: shared, ttl: cfg.TTL.D(), max: cfg.MaxEntries, mem: newLRU[summaryEntry](cfg.MaxEntries, cfg.TTL.D())}
}

func (c *summaryCache) off(key string) bool {
	return c == nil || key == "" || c.ttl <= 0 || c.max <= 0
}

func (c *summaryCache) get(ctx context.Context, key string, now time.Time) (summaryEntry, bool) {
	if c.off(key) {
		return summaryEntry{}, false
	}
	if s, ok := c.mem.get(key, now); ok {
		return s, true
	}
	if c.shared == nil {
		return summaryEntry{}, false
	}
	sctx, cancel := context.WithTimeout(ctx, sharedTimeout)
	defer cancel()
	sa, ok, err := c.shared.GetAnswer(sctx, key, now)
	if err != nil || !ok {
		return summaryEntry{}, false
	}
	var s summaryEntry
	if json.Unmarshal([]byte(sa.Content), &s) != nil || now.Sub(s.At) > c.ttl {
		return summaryEntry{}, false
	}
	c.mem.put(key, s, s.At)
	return s, true
}

func (c *summaryCache) put(ctx context.Context, key string, s summaryEntry, tenant string) error {
	if c.off(key) {
		return nil
	}
	c.mem.put(key, s, s.At)
	if c.shared == nil {
		return nil
	}
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, sharedTimeout)
	defer cancel()
	return c.shared.PutAnswer(sctx, key, tenant, store.Answer{Content: string(b), Model: s.Model, At: s.At}, c.ttl)
}
