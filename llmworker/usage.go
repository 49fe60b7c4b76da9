package llmworker

import (
	"context"
	"log/slog"
	"maps"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/durable-llm/durable-llm/store"
)

// UsageStore is where a worker adds the tokens its calls counted
// (store.Postgres).
type UsageStore interface {
	AddUsage(ctx context.Context, minute time.Time, rows []store.Tokens) error
}

// TokensMetric is the counter the LLMCall workflow counts tokens on
// (llm_tokens_total, tags kind, tenant and model): the same numbers go to
// the usage table, so `starter usage` and the metrics agree.
const TokensMetric = "llm_tokens"

// flushTimeout bounds one flush: a store that hangs delays the counts,
// never the worker's shutdown.
const flushTimeout = 10 * time.Second

// maxPendingUsage bounds the counts a worker keeps while the store is
// down (minutes × tenants × models × kinds); beyond it new counts are
// dropped and logged.
const maxPendingUsage = 50_000

type usageKey struct {
	minute              time.Time
	tenant, model, kind string
}

// Usage adds the tokens the worker's calls count to the shared store's
// usage table (docs/how-it-works.md "Shared store and usage"), every flush interval: it reads
// them off the workflow's llm_tokens counter through Handler, which the
// SDK calls only when the workflow runs, never on replay, so a call's
// tokens are added once.
type Usage struct {
	st     UsageStore
	logger *slog.Logger
	now    func() time.Time

	mu      sync.Mutex
	pending map[usageKey]int64
	dropped int64

	// The spend meter (PriceWith): what each tenant's calls cost today
	// (UTC), the fleet's from the store at the last flush plus what this
	// worker counted since.
	cost  func(model, kind string, n int64) float64
	day   time.Time
	fleet map[string]float64
	local map[string]float64
	// flushing is the spend of the batch a flush is writing: counted until
	// the fleet's spend, read back after the write, holds it.
	flushing map[string]float64

	stop chan struct{}
	done chan struct{}
}

// UsageReader is a store that sums the usage table (store.Postgres): the
// spend meter reads the fleet's spend from it.
type UsageReader interface {
	Usage(ctx context.Context, since time.Time) ([]store.Tokens, error)
}

// NewUsage starts adding counts to st every flush; Close flushes the rest.
// With a nil st it only meters spend (PriceWith), from this worker's
// calls.
func NewUsage(st UsageStore, flush time.Duration, logger *slog.Logger) *Usage {
	if logger == nil {
		logger = slog.Default()
	}
	u := &Usage{st: st, logger: logger, now: time.Now, pending: map[usageKey]int64{}, stop: make(chan struct{}), done: make(chan struct{}),
		fleet: map[string]float64{}, local: map[string]float64{}}
	if st == nil {
		close(u.done) // a spend meter alone: nothing to flush
		return u
	}
	go u.loop(flush)
	return u
}

func (u *Usage) loop(every time.Duration) {
	defer close(u.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
			u.Flush(ctx)
			cancel()
		case <-u.stop:
			ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
			u.Flush(ctx)
			cancel()
			return
		}
	}
}

// Close stops the flushes after a last one.
func (u *Usage) Close() {
	close(u.stop)
	<-u.done
}

// PriceWith makes u a spend meter: cost prices n tokens of kind on model
// (config.Config.TokenCost). Call it before the worker starts.
func (u *Usage) PriceWith(cost func(model, kind string, n int64) float64) { u.cost = cost }

// Spent is what tenant's calls cost today (UTC) at now: the fleet's, as
// the store summed it at the last flush, plus what this worker counted
// since; without a store, this worker's alone.
func (u *Usage) Spent(tenant string, now time.Time) float64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.rollover(now)
	return u.fleet[tenant] + u.local[tenant] + u.flushing[tenant]
}

// rollover starts a new day's spend at midnight UTC. Called with u.mu held.
func (u *Usage) rollover(now time.Time) {
	if day := now.UTC().Truncate(24 * time.Hour); !day.Equal(u.day) {
		u.day, u.fleet, u.local, u.flushing = day, map[string]float64{}, map[string]float64{}, nil
	}
}

// add counts n tokens now.
func (u *Usage) add(tags map[string]string, n int64) {
	now := u.now()
	k := usageKey{minute: now.UTC().Truncate(time.Minute), tenant: tags["tenant"], model: tags["model"], kind: tags["kind"]}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.cost != nil {
		u.rollover(now)
		u.local[k.tenant] += u.cost(k.model, k.kind, n)
	}
	if u.st == nil {
		return
	}
	if _, ok := u.pending[k]; !ok && len(u.pending) >= maxPendingUsage {
		u.dropped += n
		return
	}
	u.pending[k] += n
}

// Flush adds the counts so far to the store; counts it could not add are
// kept for the next flush.
func (u *Usage) Flush(ctx context.Context) {
	if u.st == nil {
		return
	}
	u.mu.Lock()
	batch, dropped := u.pending, u.dropped
	u.pending, u.dropped = map[usageKey]int64{}, 0
	if u.cost != nil {
		u.rollover(u.now())
	}
	day, taken := u.day, u.local // the spend of the batch: in the store once it is written
	u.local, u.flushing = map[string]float64{}, taken
	u.mu.Unlock()
	written := true
	defer func() { u.refreshSpend(ctx, day, taken, written) }()
	if dropped > 0 {
		u.logger.Warn("token usage dropped: the store was unreachable for too long", "tokens", dropped)
	}
	byMinute := map[time.Time][]store.Tokens{}
	for k, n := range batch {
		byMinute[k.minute] = append(byMinute[k.minute], store.Tokens{Tenant: k.tenant, Model: k.model, Kind: k.kind, Tokens: n})
	}
	for minute, rows := range byMinute {
		if err := u.st.AddUsage(ctx, minute, rows); err != nil {
			written = false
			u.logger.Warn("token usage not written; kept for the next flush", "error", err)
			u.mu.Lock()
			for _, r := range rows {
				u.pending[usageKey{minute: minute, tenant: r.Tenant, model: r.Model, kind: r.Kind}] += r.Tokens
			}
			u.mu.Unlock()
		}
	}
}

// refreshSpend reads the fleet's spend of today from the store after a
// flush. When the batch was not written, or the store cannot be read, the
// batch's spend (taken) goes back to this worker's count, so nothing
// counted is forgotten.
func (u *Usage) refreshSpend(ctx context.Context, day time.Time, taken map[string]float64, written bool) {
	if u.cost == nil {
		u.mu.Lock()
		u.flushing = nil
		u.mu.Unlock()
		return
	}
	var fleet map[string]float64
	if r, ok := u.st.(UsageReader); ok && written {
		rows, err := r.Usage(ctx, day)
		if err != nil {
			u.logger.Warn("spend of today not read from the store; this worker's count stands in", "error", err)
		} else {
			fleet = map[string]float64{}
			for _, row := range rows {
				fleet[row.Tenant] += u.cost(row.Model, row.Kind, row.Tokens)
			}
		}
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.day.Equal(day) {
		return // midnight passed during the flush: the new day starts at 0
	}
	u.flushing = nil
	if fleet != nil {
		u.fleet = fleet
		return
	}
	for t, c := range taken {
		u.local[t] += c
	}
}

// Handler wraps the client's metrics handler: every metric goes to h as
// before, and llm_tokens increments are counted for the store too.
func (u *Usage) Handler(h client.MetricsHandler) client.MetricsHandler {
	return usageHandler{MetricsHandler: h, u: u}
}

type usageHandler struct {
	client.MetricsHandler
	u    *Usage
	tags map[string]string
}

func (h usageHandler) Unwrap() client.MetricsHandler { return h.MetricsHandler }

func (h usageHandler) WithTags(tags map[string]string) client.MetricsHandler {
	merged := maps.Clone(h.tags)
	if merged == nil {
		merged = map[string]string{}
	}
	maps.Copy(merged, tags)
	return usageHandler{MetricsHandler: h.MetricsHandler.WithTags(tags), u: h.u, tags: merged}
}

func (h usageHandler) Counter(name string) client.MetricsCounter {
	c := h.MetricsHandler.Counter(name)
	if name != TokensMetric {
		return c
	}
	return usageCounter{MetricsCounter: c, u: h.u, tags: h.tags}
}

type usageCounter struct {
	client.MetricsCounter
	u    *Usage
	tags map[string]string
}

func (c usageCounter) Inc(n int64) {
	c.MetricsCounter.Inc(n)
	if n > 0 {
		c.u.add(c.tags, n)
	}
}
