package guard

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/durable-llm/durable-llm/policies/config"
)

// windowBuckets is the number of buckets of a sliding window: the window
// slides in steps of Window/60 (1 s for a 60 s window).
const windowBuckets = 60

// RetryBudget is the per-process retry budget (docs/how-it-works.md "The
// guard on one page", rule budget): retries are paid from a reserve of at
// most Floor retries, which every request refills by Ratio of a retry. The
// reserve is worked out from the window's buckets, oldest first, starting
// full: a retry leaves the window after Window, as a deposit and a
// withdrawal leave Finagle's leaky bucket, so the floor comes back once
// per Window and, in any Window, retries ≤ Floor + Ratio × its requests
// (what a bucket's requests earn beyond the reserve is kept only up to
// Floor, so the healthy traffic before an incident does not pay for its
// retries). The settings are used as given; zeros mean what they say:
//   - Ratio 0: requests earn no retries, only the Floor per Window is left.
//   - Floor 0: no retries beyond the ratio (the reserve holds one retry,
//     earned by 1/Ratio requests).
//   - Ratio 0 and Floor 0: no retries at all.
//
// A RetryBudget is safe for concurrent use. Build one per process and share
// it between all calls.
type RetryBudget struct {
	mu    sync.Mutex
	ratio float64
	floor int
	ring  windowRing
	// share and tenants: the tenant share (config BudgetConfig.TenantShare)
	// and each tenant's requests and retries in the window.
	share   float64
	tenants map[string]*windowRing
	// sync, when set (Budgets.SetSync), gives the fleet's size: the
	// budget keeps its worker's share of the floor.
	sync *Sync
	// shareOnly: a share budget (NewShareBudget), a sliding window with no
	// reserve.
	shareOnly bool
	// waiting: the calls this budget refused a retry that still recheck
	// for one, by call, in line by when they were first refused
	// (TryRetryInTurn).
	waiting map[string]waiter
}

// waiter is a call in a budget's line.
type waiter struct{ firstRefused, lastRecheck time.Time }

// live reports whether w still holds its place at now: it rechecked
// within waiterLive.
func (w waiter) live(now time.Time) bool { return now.Sub(w.lastRecheck) <= waiterLive }

// waiterLive is how long a call keeps its place in line after its last
// recheck: longer than a waiting call's step between rechecks (at most
// 1.5 s) and the workflow's turn around it. A call that stopped waiting
// (answered elsewhere, or from the fallback) leaves the line then.
const waiterLive = 2 * time.Second

// BudgetSnapshot is the state of a RetryBudget at one instant.
type BudgetSnapshot struct {
	// Requests and Retries recorded in the window.
	Requests int
	Retries  int
	// Allowed is how many retries the window allows in total: the
	// retries spent in it plus the whole retries left in the reserve.
	// Retries may reach it, not exceed it.
	Allowed int
}

// Remaining is how many more retries the window allows now.
func (s BudgetSnapshot) Remaining() int { return max(s.Allowed-s.Retries, 0) }

// NewRetryBudget returns a budget with cfg's settings, taken as given (see
// RetryBudget for what a zero Ratio or Floor means). Build cfg with
// config.DefaultConfig or config.LoadConfig, which validate it. NewRetryBudget
// panics when cfg is one config.Validate refuses: a Window that is not
// positive, a Ratio outside [0,1] or a negative Floor.
func NewRetryBudget(cfg config.BudgetConfig) *RetryBudget {
	if err := checkBudget(cfg); err != nil {
		panic(fmt.Sprintf("guard.NewRetryBudget: %v", err))
	}
	return &RetryBudget{ratio: cfg.Ratio, floor: cfg.Floor, ring: newWindowRing(cfg.Window.D()),
		share: cfg.TenantShare, tenants: map[string]*windowRing{}}
}

// NewShareBudget returns a budget that allows, over the last Window, at
// most Ratio × the requests recorded in it plus Floor: a share of the
// traffic, without the reserve of a retry budget, for what should follow
// the traffic of the last window rather than bound an incident (hedges,
// which help most in a latency spike, paid for by the calls before it).
func NewShareBudget(cfg config.BudgetConfig) *RetryBudget {
	b := NewRetryBudget(cfg)
	b.shareOnly = true
	return b
}

// checkBudget refuses the budget settings config.Validate refuses.
func checkBudget(cfg config.BudgetConfig) error {
	switch {
	case cfg.Window <= 0:
		return fmt.Errorf("budget.window must be a positive duration, got %s", cfg.Window.D())
	case !(cfg.Ratio >= 0 && cfg.Ratio <= 1):
		return fmt.Errorf("budget.ratio must be a fraction in [0,1], got %v", cfg.Ratio)
	case cfg.Floor < 0:
		return fmt.Errorf("budget.floor must be a number of retries ≥ 0, got %d", cfg.Floor)
	}
	return nil
}

// RecordRequest records one new call (its first attempt) at now. Retries
// are recorded by TryRetry and are not requests.
func (b *RetryBudget) RecordRequest(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ring.add(now, 1, 0)
}

// RecordRequestFor is RecordRequest for a call of tenant.
func (b *RetryBudget) RecordRequestFor(now time.Time, tenant string) {
	b.RecordRequest(now)
	if b.share <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tenant(tenant, now).add(now, 1, 0)
}

// tenant is tenant's window, made on first use; windows left empty are
// dropped when many tenants have one. Called with b.mu held.
func (b *RetryBudget) tenant(name string, now time.Time) *windowRing {
	r, ok := b.tenants[name]
	if !ok {
		if len(b.tenants) >= 1024 {
			for n, t := range b.tenants {
				if req, ret := t.sumAt(t.peek(now)); req == 0 && ret == 0 {
					delete(b.tenants, n)
				}
			}
		}
		w := newWindowRing(b.ring.width * windowBuckets)
		r = &w
		b.tenants[name] = r
	}
	return r
}

// TryRetryFor is TryRetry for a retry of tenant's call. With a tenant
// share, while other tenants' calls are in this process's window, the
// tenant's retries in it may be at most share × the retries the window
// allows (at least one): then it is refused with capped true, and the
// budget is left for the others. The retries that calls waiting in the
// budget's line need are theirs (TryRetryInTurn): a retry for no call
// in line comes after them.
func (b *RetryBudget) TryRetryFor(now time.Time, tenant string) (ok, capped bool) {
	ok, capped, _ = b.TryRetryInTurn(now, tenant, "")
	return ok, capped
}

// TryRetryInTurn is TryRetryFor for the retry of call, in turn: the calls
// this budget refused that still wait for a retry are served in the order
// they were first refused. A retry goes to call only while the budget
// holds one for each call ahead of it in line (refused earlier, rechecked
// within waiterLive) besides its own; refused, it keeps its place (ahead
// says how many calls come first when they are why). Without a line the
// waiting calls took the retries as their rechecks happened to fall, and
// a call refused first could wait out call.max_wait while calls refused
// after it were served. A call refused for its tenant's share holds no
// place. An empty call (a hedge, a resend within an attempt) takes no
// place and comes after every call in line.
func (b *RetryBudget) TryRetryInTurn(now time.Time, tenant, call string) (ok, capped bool, ahead int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	since := b.since(call, now)
	b.forget(now)
	ok, capped, ahead = b.turn(now, tenant, call, since)
	switch {
	case ok:
		b.spend(now, tenant)
		fallthrough
	case capped:
		delete(b.waiting, call)
	default:
		b.wait(call, since, now)
	}
	return ok, capped, ahead
}

// Turn is TryRetryInTurn without its effects: whether the budget would
// pay call's retry now, and if not, why. It spends nothing and changes
// no place in line (Refused keeps call's).
func (b *RetryBudget) Turn(now time.Time, tenant, call string) (ok, capped bool, ahead int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.turn(now, tenant, call, b.since(call, now))
}

// Refused keeps call's place in line at now after Turn refused its retry,
// as TryRetryInTurn's refusal does (a refusal for its tenant's share
// holds no place).
func (b *RetryBudget) Refused(now time.Time, call string, capped bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	since := b.since(call, now)
	b.forget(now)
	if capped {
		delete(b.waiting, call)
		return
	}
	b.wait(call, since, now)
}

// forget takes out of line the calls that stopped rechecking, with b.mu
// held.
func (b *RetryBudget) forget(now time.Time) {
	for id, w := range b.waiting {
		if !w.live(now) {
			delete(b.waiting, id)
		}
	}
}

// turn is Turn with b.mu held, for call first refused at since: the live
// calls in line ahead of it, then the budget's and the share's rule.
func (b *RetryBudget) turn(now time.Time, tenant, call string, since time.Time) (ok, capped bool, ahead int) {
	for id, w := range b.waiting {
		if w.live(now) && (call == "" || id != call && (w.firstRefused.Before(since) || w.firstRefused.Equal(since) && id < call)) {
			ahead++
		}
	}
	all := b.snapshot(now)
	if ahead > 0 && all.Remaining() <= ahead {
		return false, false, ahead
	}
	ok, capped = b.allows(all, now, tenant)
	return ok, capped, 0
}

// since is when call was first refused, now when it is not in line.
func (b *RetryBudget) since(call string, now time.Time) time.Time {
	if w, found := b.waiting[call]; found && call != "" {
		return w.firstRefused
	}
	return now
}

// wait puts call in line (or keeps its place) at now, with b.mu held; an
// empty call takes no place.
func (b *RetryBudget) wait(call string, since, now time.Time) {
	if call == "" {
		return
	}
	if b.waiting == nil {
		b.waiting = map[string]waiter{}
	}
	b.waiting[call] = waiter{firstRefused: since, lastRecheck: now}
}

// leave takes call out of the line.
func (b *RetryBudget) leave(call string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.waiting, call)
}

// allows is the budget's and the tenant share's rule, without the line,
// with b.mu held: whether a retry of tenant's call may go at now, the
// budget's counts being all, and whether the share refuses it (capped). A
// tenant with no window yet has made no retry: it is not capped, and no
// window is made for it here.
func (b *RetryBudget) allows(all BudgetSnapshot, now time.Time, tenant string) (ok, capped bool) {
	if t, found := b.tenants[tenant]; b.share > 0 && found {
		mine, myRetries := t.sum(now)
		limit := max(int(math.Floor(b.share*float64(all.Allowed)+1e-9)), 1)
		if all.Requests > mine && myRetries >= limit {
			return false, true
		}
	}
	return all.Remaining() > 0, false
}

// spend records a retry of tenant's call at now, with b.mu held.
func (b *RetryBudget) spend(now time.Time, tenant string) {
	b.ring.add(now, 0, 1)
	if b.share > 0 {
		b.tenant(tenant, now).add(now, 0, 1)
	}
}

// TryRetry reports whether a retry is allowed at now and, when it is,
// records it, so concurrent callers can never overdraw the budget.
func (b *RetryBudget) TryRetry(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.snapshot(now).Remaining() <= 0 {
		return false
	}
	b.ring.add(now, 0, 1)
	return true
}

// Remaining returns how many retries the budget allows at now.
func (b *RetryBudget) Remaining(now time.Time) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.remaining(now)
}

// remaining is Remaining with b.mu held.
func (b *RetryBudget) remaining(now time.Time) int {
	return b.snapshot(now).Remaining()
}

// Snapshot returns the budget's counts at now, for metrics and reasons.
func (b *RetryBudget) Snapshot(now time.Time) BudgetSnapshot {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.snapshot(now)
}

func (b *RetryBudget) snapshot(now time.Time) BudgetSnapshot {
	return b.stateAt(b.ring.at(now))
}

// stateAt is the budget's snapshot at the end of bucket i: the window's
// counts, and the reserve worked out from its buckets oldest first.
func (b *RetryBudget) stateAt(i int64) BudgetSnapshot {
	var s BudgetSnapshot
	if b.shareOnly {
		s.Requests, s.Retries = b.ring.sumAt(i)
		s.Allowed = int(math.Floor(b.ratio*float64(s.Requests)+1e-9)) + b.floor
		return s
	}
	floor := b.floorShare(i)
	rr := reserveOf(b.ratio, floor)
	level := floor
	for k := i - windowBuckets + 1; k <= i; k++ {
		req, ret := b.ring.bucket(k)
		s.Requests += req
		s.Retries += ret
		level = rr.step(level, req, ret)
	}
	s.Allowed = s.Retries + whole(level)
	return s
}

// reserveRule is how a budget's reserve fills. It starts full (floor
// retries) and holds at most size retries from one bucket to the next; a
// bucket adds ratio × its requests and its retries spend what it added
// and what it was given. So a bucket's own requests pay for its retries
// however many they are, and what is left over is kept only up to size.
type reserveRule struct{ size, ratio float64 }

// floorShare is this process's share of the floor in the window that ends
// at bucket i: all of it alone, and 1/n of it in a fleet of n workers
// (Budgets.SetSync), so the fleet's floor is the policy's however many
// workers pay from it. A retry cannot be split: a worker whose share is
// under one retry has a whole one in a window with that share's
// probability, drawn by its name and the window's number (one window in
// n/floor on average), else none. With b.mu held.
func (b *RetryBudget) floorShare(i int64) float64 {
	if b.sync == nil {
		return float64(b.floor)
	}
	share := float64(b.floor) / float64(b.sync.Workers())
	if share <= 0 || share >= 1 {
		return share
	}
	epoch := i / windowBuckets
	if i < 0 && i%windowBuckets != 0 {
		epoch-- // floor, not truncation
	}
	if spreadOf(b.sync.Worker(), epoch+1) < share {
		return 1
	}
	return 0
}

// reserveOf is the reserve of a budget with ratio and floor: floor
// retries, but at least one whole retry when the floor or requests earn
// any (a retry cannot be split: a worker whose share of the floor is 2.5
// holds up to 2.5, one with none keeps what its requests earn until it
// makes one retry).
func reserveOf(ratio, floor float64) reserveRule {
	size := floor
	if size < 1 && (floor > 0 || ratio > 0) {
		size = 1
	}
	return reserveRule{size: size, ratio: ratio}
}

// step is the reserve after a bucket of req requests and ret retries
// that was given level.
func (r reserveRule) step(level float64, req, ret int) float64 {
	return min(r.size, level) + r.ratio*float64(req) - float64(ret)
}

// whole is the whole retries a reserve level holds. The epsilon keeps
// float noise (0.1 × 10 = 0.999…) from losing a retry.
func whole(level float64) int { return max(int(math.Floor(level+1e-9)), 0) }

// windowRing counts two kinds of events over a sliding time window in
// windowBuckets buckets. It is not synchronised; its owner locks.
type windowRing struct {
	width   time.Duration
	origin  time.Time
	started bool
	latest  int64 // newest bucket index seen
	buckets [windowBuckets]windowBucket
}

type windowBucket struct {
	index int64
	a, b  int
}

func newWindowRing(window time.Duration) windowRing {
	width := max(window/windowBuckets, 1)
	r := windowRing{width: width}
	for i := range r.buckets {
		r.buckets[i].index = math.MinInt64 // empty
	}
	return r
}

// at returns the bucket index of now, never older than the newest seen.
func (r *windowRing) at(now time.Time) int64 {
	if !r.started {
		r.origin, r.started = now, true
	}
	r.latest = r.peek(now)
	return r.latest
}

// peek is at without changing the ring (a query may call it).
func (r *windowRing) peek(now time.Time) int64 {
	if !r.started {
		return 0
	}
	d := now.Sub(r.origin)
	i := int64(d / r.width)
	if d < 0 && d%r.width != 0 {
		i-- // floor, not truncation
	}
	return max(r.latest, i)
}

func (r *windowRing) add(now time.Time, a, b int) {
	i := r.at(now)
	bk := &r.buckets[((i%windowBuckets)+windowBuckets)%windowBuckets]
	if bk.index != i {
		*bk = windowBucket{index: i}
	}
	bk.a += a
	bk.b += b
}

func (r *windowRing) sum(now time.Time) (a, b int) {
	return r.sumAt(r.at(now))
}

// bucket returns the counts of bucket k (zero when it is not in the ring).
func (r *windowRing) bucket(k int64) (a, b int) {
	bk := r.buckets[((k%windowBuckets)+windowBuckets)%windowBuckets]
	if bk.index != k {
		return 0, 0
	}
	return bk.a, bk.b
}

// sumAt sums the window that ends at bucket i.
func (r *windowRing) sumAt(i int64) (a, b int) {
	for _, bk := range r.buckets {
		if bk.index > i-windowBuckets && bk.index <= i {
			a += bk.a
			b += bk.b
		}
	}
	return a, b
}

// Budgets are the retry budgets of a process, one per capacity
// (config.ModelConfig.Capacity: an endpoint, or a model where the
// provider's capacity is per model): every model on one endpoint shares
// its budget, so a call that switches models on a sick endpoint pays from
// the same window as one that retries. Safe for concurrent use.
type Budgets struct {
	cfg  config.BudgetConfig
	mu   sync.Mutex
	by   map[string]*RetryBudget
	sync *Sync
}

// SetSync joins the budgets to their fleet: each keeps its worker's
// share of the floor (see Sync).
func (b *Budgets) SetSync(s *Sync) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sync = s
	for _, r := range b.by {
		r.mu.Lock()
		r.sync = s
		r.mu.Unlock()
	}
}

// NewBudgets returns per-endpoint budgets with cfg's settings (see
// NewRetryBudget, which panics on the same settings).
func NewBudgets(cfg config.BudgetConfig) *Budgets {
	if err := checkBudget(cfg); err != nil {
		panic(fmt.Sprintf("guard.NewBudgets: %v", err))
	}
	return &Budgets{cfg: cfg, by: map[string]*RetryBudget{}}
}

// For returns the budget of endpoint, made on first use.
func (b *Budgets) For(endpoint string) *RetryBudget {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.by[endpoint]
	if !ok {
		r = NewRetryBudget(b.cfg)
		r.sync = b.sync
		b.by[endpoint] = r
	}
	return r
}

// Leave takes call out of every budget's line (TryRetryInTurn): it has
// its attempt.
func (b *Budgets) Leave(call string) {
	if call == "" {
		return
	}
	b.mu.Lock()
	all := make([]*RetryBudget, 0, len(b.by))
	for _, r := range b.by {
		all = append(all, r)
	}
	b.mu.Unlock()
	for _, r := range all {
		r.leave(call)
	}
}

// Endpoints lists, sorted, the endpoints that have a budget.
func (b *Budgets) Endpoints() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]string, 0, len(b.by))
	for e := range b.by {
		out = append(out, e)
	}
	slices.Sort(out)
	return out
}

// Spent lists, sorted, the endpoints among those given whose budget allows
// no retry at now.
func (b *Budgets) Spent(now time.Time, endpoints ...string) []string {
	var out []string
	for _, e := range endpoints {
		if !slices.Contains(out, e) && b.For(e).Remaining(now) <= 0 {
			out = append(out, e)
		}
	}
	slices.Sort(out)
	return out
}
