package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-llm/durable-llm/llmworker"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
	"github.com/durable-llm/durable-llm/policies/guard"
	"github.com/durable-llm/durable-llm/replay"
	"github.com/durable-llm/durable-llm/workflows"
)

// The fleet benchmark: N synthetic workers share their guards through one
// real guard workflow on a dev server, each with the guards and the link
// (llmworker.GuardLink) a real worker runs, and calls spread unevenly
// across them (worker i takes a share ∝ 1/(i+1)). The endpoint fails for
// ten seconds; one worker meets a rate limit; a tenth more workers join.
// What a user of a large fleet notices is measured: how long a breaker
// trip, its recovery, a hold and a change in the worker count take to
// reach the last worker; the requests the fleet sends to the sick
// endpoint more than 2 s after a trip was known anywhere ("leaked"); and
// what the guard workflow is asked to do (signals and history events per
// second, p99 over 1 s windows) and the fleet's reads of its view.

// FleetOptions set a fleet run.
type FleetOptions struct {
	// Workers are the fleet sizes to measure, one run each.
	Workers []int
	// Rate is the fleet's calls a second (spread over its workers).
	Rate float64
	// ReportsPerRun makes the guard continue as new during the run.
	ReportsPerRun int
	Seed          uint64
	// Progress, when set, gets a line per phase.
	Progress func(format string, args ...any)
}

// FleetRow is the measurement of one fleet size.
type FleetRow struct {
	Workers, Joined int
	// Trip, Recovery, Hold and Count are the p99 times, over the workers,
	// for a breaker trip, its close, a hold and a change in the worker
	// count to reach a worker, from the first worker that had it; Missed
	// counts the workers it never reached in the run's time for it.
	Trip, Recovery, Hold, Count                         time.Duration
	TripMax, RecoveryMax, HoldMax, CountMax             time.Duration
	TripMissed, RecoveryMissed, HoldMissed, CountMissed int
	// Counted is how long after the new workers started every worker
	// counted them (their announcements are spread over ReportEvery).
	Counted time.Duration
	// Left workers stopped at the end, saying so; Leave (LeaveMax) the p99
	// (max) time for the smaller count to reach a worker from the first
	// that had it, LeftCounted until the last had it, LeaveMissed the
	// workers it never reached within 15 s.
	Left, LeaveMissed int
	// LeftSeen is, when some workers missed the smaller count, the
	// counts the staying workers had at the end of the wait (count →
	// workers), and the count the guard's own view had then: what the
	// miss was.
	LeftSeen        map[int]int `json:",omitempty"`
	LeftGuardSaw    int         `json:",omitempty"`
	Leave, LeaveMax time.Duration
	LeftCounted     time.Duration
	// Calls, Sends: the calls made and the requests they sent;
	// IncidentSends those while the endpoint failed; Leaked those of
	// them sent more than 2 s after the trip was known anywhere by a
	// worker whose breaker was closed (not a trial).
	Calls, Sends, IncidentSends, Leaked int
	// Signals and Events on the guard: p99 and peak over 1 s windows, and
	// totals; Runs of the guard (continue-as-new); Reads of the view by
	// the fleet, a second.
	SignalsP99, SignalsPeak, EventsP99, EventsPeak int
	SignalsTotal, EventsTotal, Runs                int
	ReadsPerSecond                                 float64
	Duration                                       time.Duration
	signalSeries                                   []int
}

// series lists per-second counts from the first second to the last.
func series(by map[int64]int) []int {
	lo, hi := int64(1<<62), int64(-1<<62)
	for s := range by {
		lo, hi = min(lo, s), max(hi, s)
	}
	var out []int
	for s := lo; s <= hi; s++ {
		out = append(out, by[s])
	}
	return out
}

// LeakedPct is the share of the incident's requests that leaked.
func (r FleetRow) LeakedPct() float64 {
	if r.IncidentSends == 0 {
		return 0
	}
	return 100 * float64(r.Leaked) / float64(r.IncidentSends)
}

// Amplification is requests per call over the run.
func (r FleetRow) Amplification() float64 {
	if r.Calls == 0 {
		return 0
	}
	return float64(r.Sends) / float64(r.Calls)
}

// member is one synthetic worker: the guards and link a real worker runs.
type member struct {
	sync     *guard.Sync
	breakers *guard.BreakerRegistry
	budgets  *guard.Budgets
	holds    *guard.Holds
	link     *llmworker.GuardLink
	cancel   context.CancelFunc
	done     chan struct{}
}

const (
	fleetModel    = "qwen-72b"
	fleetEndpoint = "http://upstream.example:8000"
	fleetScope    = "http://limited.example:8000"
)

// RunFleet measures each fleet size of o on the Temporal server c talks to.
func RunFleet(ctx context.Context, c client.Client, o FleetOptions) ([]FleetRow, error) {
	if o.Rate <= 0 {
		o.Rate = 20
	}
	if o.ReportsPerRun <= 0 {
		o.ReportsPerRun = 150
	}
	if o.Progress == nil {
		o.Progress = func(string, ...any) {}
	}
	var rows []FleetRow
	for _, n := range o.Workers {
		row, err := runFleetSize(ctx, c, o, n)
		if err != nil {
			return rows, fmt.Errorf("fleet of %d: %w", n, err)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

func runFleetSize(ctx context.Context, c client.Client, o FleetOptions, n int) (FleetRow, error) {
	cfg := config.DefaultConfig()
	tq := fmt.Sprintf("fleet-bench-%d-%d", n, time.Now().UnixNano())
	gw := worker.New(c, tq, worker.Options{})
	gw.RegisterWorkflowWithOptions(workflows.LLMGuard, workflow.RegisterOptions{Name: workflows.GuardWorkflowName})
	if err := gw.Start(); err != nil {
		return FleetRow{}, err
	}
	defer gw.Stop()
	input := workflows.GuardInput{Breaker: cfg.Breaker, ReportsPerRun: o.ReportsPerRun}
	var mu sync.Mutex
	var members []*member
	join := func(i int) {
		m := &member{
			sync:     guard.NewSync(fmt.Sprintf("synthetic-%d", i), 2*time.Second),
			breakers: guard.NewBreakerRegistry(cfg.Breaker, nil), budgets: guard.NewBudgets(cfg.Budget), holds: guard.NewHolds(),
			done: make(chan struct{}),
		}
		m.breakers.SetSync(m.sync)
		m.budgets.SetSync(m.sync)
		m.holds.SetSync(m.sync)
		m.link = llmworker.NewGuardLink(c, m.sync, llmworker.GuardLinkOptions{TaskQueue: tq, Input: input})
		lctx, cancel := context.WithCancel(ctx)
		m.cancel = cancel
		go func() {
			defer close(m.done)
			m.link.Run(lctx)
		}()
		mu.Lock()
		members = append(members, m)
		mu.Unlock()
	}
	all := func() []*member {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(members)
	}
	defer func() {
		for _, m := range all() {
			m.cancel()
			<-m.done
		}
	}()
	started := time.Now()
	o.Progress("fleet %d: %d workers joining", n, n)
	for i := range n {
		join(i)
		time.Sleep(time.Duration(float64(5*time.Second) / float64(n))) // joins spread over 5 s
	}
	// Every worker knows the fleet's size before the traffic starts: each
	// announces itself within a report interval of the fleet it sees
	// (guard.ReportEvery: 30 s at 300 workers), and the others read it
	// within two reads.
	learn := guard.ReportEvery(n+1) + 2*guard.ReadEvery(n, 500*time.Millisecond) + 10*time.Second
	if err := waitAll(ctx, all, learn, func(m *member) bool { return m.sync.Workers() == n }); err != nil {
		return FleetRow{}, fmt.Errorf("the workers never all learned a fleet of %d: %w", n, err)
	}

	row := FleetRow{Workers: n}
	t0 := time.Now()
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	const (
		downFrom, downTo = 5 * time.Second, 15 * time.Second
		holdAt, joinAt   = 22 * time.Second, 27 * time.Second
	)
	joined := max(1, n/10)
	// A worker that joins announces itself within ReportEvery of the
	// fleet's size (guard.Sync): the run lasts until every one has.
	end := joinAt + guard.ReportEvery(n+joined) + 4*time.Second
	down := func(t time.Time) bool { return !t.Before(at(downFrom)) && t.Before(at(downTo)) }

	// Watch every worker's guards every 25 ms, a local read: when each
	// first has the breaker open, closed again, the scope held, the new
	// count.
	type seen struct{ open, closed, held, counted time.Time }
	var wmu sync.Mutex
	firsts := map[*member]*seen{}
	var tripKnown time.Time
	wctx, wstop := context.WithCancel(ctx)
	defer wstop()
	wdone := make(chan struct{})
	go func() {
		defer close(wdone)
		t := time.NewTicker(25 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case now := <-t.C:
				for _, m := range all() {
					st := m.breakers.State(fleetModel, now)
					wmu.Lock()
					f := firsts[m]
					if f == nil {
						f = &seen{}
						firsts[m] = f
					}
					if st == guard.BreakerOpen && f.open.IsZero() && now.After(at(downFrom)) {
						f.open = now
						if tripKnown.IsZero() {
							tripKnown = now
						}
					}
					if !f.open.IsZero() && f.closed.IsZero() && st == guard.BreakerClosed && now.After(at(downTo)) {
						f.closed = now
					}
					if f.held.IsZero() && now.After(at(holdAt)) && m.holds.Left(fleetScope, now) > 0 {
						f.held = now
					}
					if f.counted.IsZero() && now.After(at(joinAt)) && m.sync.Workers() == n+joined {
						f.counted = now
					}
					wmu.Unlock()
				}
			}
		}
	}()

	// The calls: Poisson arrivals, each on a worker drawn ∝ 1/(i+1); a
	// call sends when its worker's breaker allows, and once more when it
	// failed and the budget pays a retry.
	rng := rand.New(rand.NewPCG(o.Seed, uint64(n)))
	weights := make([]float64, 0, n+joined)
	var sum float64
	weight := func(i int) float64 { return 1 / float64(i+1) }
	for i := range n {
		weights = append(weights, weight(i))
		sum += weights[i]
	}
	pick := func(k int) int {
		u := rng.Float64() * sum
		for i := 0; i < k; i++ {
			if u -= weights[i]; u < 0 {
				return i
			}
		}
		return k - 1
	}
	var smu sync.Mutex
	send := func(m *member, now time.Time) bool {
		closed := m.breakers.State(fleetModel, now) == guard.BreakerClosed
		if !m.breakers.Allow(fleetModel, now) {
			return false
		}
		smu.Lock()
		row.Sends++
		if down(now) {
			row.IncidentSends++
			wmu.Lock()
			if closed && !tripKnown.IsZero() && now.Sub(tripKnown) > 2*time.Second {
				row.Leaked++
			}
			wmu.Unlock()
		}
		smu.Unlock()
		class := failure.None
		if down(now) {
			class = failure.ServerError
		}
		m.breakers.RecordOutcome(fleetModel, now, class)
		return class == failure.None
	}
	held, joinedDone := false, false
	next := t0
	for {
		next = next.Add(time.Duration(rng.ExpFloat64() / o.Rate * float64(time.Second)))
		if next.After(at(end)) {
			break
		}
		select {
		case <-ctx.Done():
			return row, ctx.Err()
		case <-time.After(time.Until(next)):
		}
		now := time.Now()
		if !held && now.After(at(holdAt)) {
			held = true
			ms := all()
			ms[len(ms)-1].holds.Hold(fleetScope, now, 5*time.Second) // the least busy worker meets a rate limit
		}
		if !joinedDone && now.After(at(joinAt)) {
			joinedDone = true
			o.Progress("fleet %d: %d more workers join", n, joined)
			for i := range joined {
				join(n + i)
				weights = append(weights, weight(n+i))
				sum += weights[n+i]
			}
		}
		ms := all()
		m := ms[pick(len(ms))]
		row.Calls++
		go func() {
			b := m.budgets.For(fleetEndpoint)
			b.RecordRequest(now)
			if !send(m, now) && b.TryRetry(time.Now()) {
				send(m, time.Now())
			}
		}()
	}
	time.Sleep(2 * time.Second) // the last changes reach the last workers
	wstop()
	<-wdone
	row.Joined = joined

	// A tenth of the workers stop (the least busy; each says it leaves):
	// how long until every other counts the fleet without them.
	left := max(1, n/10)
	ms := all()
	gone, stay := ms[len(ms)-left:], ms[:len(ms)-left]
	leftAt := time.Now()
	for _, m := range gone {
		m.cancel()
		<-m.done
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := m.link.Leave(lctx)
		cancel()
		if err != nil {
			return row, fmt.Errorf("a worker could not leave: %w", err)
		}
	}
	want := n + joined - left
	counted := map[*member]time.Time{}
	for deadline := time.Now().Add(15 * time.Second); len(counted) < len(stay) && time.Now().Before(deadline); time.Sleep(25 * time.Millisecond) {
		for _, m := range stay {
			if _, ok := counted[m]; !ok && m.sync.Workers() == want {
				counted[m] = time.Now()
			}
		}
	}
	row.Left = left
	row.LeaveMissed = len(stay) - len(counted)
	if row.LeaveMissed > 0 {
		row.LeftSeen = map[int]int{}
		for _, m := range stay {
			row.LeftSeen[m.sync.Workers()]++
		}
		qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if q, err := c.QueryWorkflow(qctx, workflows.GuardID(tq), "", workflows.QueryGuardView, time.Now()); err == nil {
			var v guard.View
			if q.Get(&v) == nil {
				row.LeftGuardSaw = v.Workers
			}
		}
		cancel()
	}
	var firstGone time.Time
	for _, at := range counted {
		firstGone = earliest(firstGone, at)
	}
	var leaves []time.Duration
	for _, at := range counted {
		leaves = append(leaves, at.Sub(firstGone))
		row.LeftCounted = max(row.LeftCounted, at.Sub(leftAt))
	}
	row.Leave, row.LeaveMax = Percentile(leaves, 0.99), Percentile(leaves, 1)
	row.Duration = time.Since(t0)

	var trips, recs, holds, counts []time.Duration
	var lastCounted time.Time
	var firstClose, firstHold, firstCount time.Time
	wmu.Lock()
	for _, f := range firsts {
		firstClose = earliest(firstClose, f.closed)
		firstHold = earliest(firstHold, f.held)
		firstCount = earliest(firstCount, f.counted)
	}
	for _, m := range all() {
		f := firsts[m]
		if f == nil {
			f = &seen{}
		}
		old := slices.Index(all(), m) < n
		if old { // the workers that joined later had none of these to learn
			trips, row.TripMissed = spread(trips, row.TripMissed, tripKnown, f.open)
			recs, row.RecoveryMissed = spread(recs, row.RecoveryMissed, firstClose, f.closed)
			holds, row.HoldMissed = spread(holds, row.HoldMissed, firstHold, f.held)
		}
		counts, row.CountMissed = spread(counts, row.CountMissed, firstCount, f.counted)
		if f.counted.After(lastCounted) {
			lastCounted = f.counted
		}
	}
	wmu.Unlock()
	row.Trip, row.TripMax = Percentile(trips, 0.99), Percentile(trips, 1)
	row.Recovery, row.RecoveryMax = Percentile(recs, 0.99), Percentile(recs, 1)
	row.Hold, row.HoldMax = Percentile(holds, 0.99), Percentile(holds, 1)
	row.Count, row.CountMax = Percentile(counts, 0.99), Percentile(counts, 1)
	if row.CountMissed == 0 {
		row.Counted = lastCounted.Sub(at(joinAt))
	}

	var reads int64
	for _, m := range all() {
		reads += m.link.Reads()
	}
	row.ReadsPerSecond = float64(reads) / time.Since(started).Seconds()
	if err := guardLoad(ctx, c, workflows.GuardID(tq), &row); err != nil {
		return row, err
	}
	o.Progress("fleet %d: trip p99 %s, leaked %d of %d, signals p99 %d/s; signals by second from the first join: %v", n, fmtDur(row.Trip), row.Leaked, row.IncidentSends, row.SignalsP99, row.signalSeries)
	return row, nil
}

// spread adds the delay from first to at to ds, or counts a miss.
func spread(ds []time.Duration, missed int, first, at time.Time) ([]time.Duration, int) {
	if first.IsZero() || at.IsZero() {
		return ds, missed + 1
	}
	return append(ds, max(at.Sub(first), 0)), missed
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || !b.IsZero() && b.Before(a) {
		return b
	}
	return a
}

// waitAll waits until ok holds for every member.
func waitAll(ctx context.Context, all func() []*member, within time.Duration, ok func(*member) bool) error {
	deadline := time.Now().Add(within)
	for {
		done := true
		for _, m := range all() {
			if !ok(m) {
				done = false
				break
			}
		}
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s", within)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// guardLoad counts the signals and events of every run of the guard by
// second of their event time.
func guardLoad(ctx context.Context, c client.Client, id string, row *FleetRow) error {
	signals, events := map[int64]int{}, map[int64]int{}
	run := ""
	for {
		h, err := replay.Fetch(ctx, c, id, run)
		if err != nil {
			return fmt.Errorf("the guard's history: %w", err)
		}
		row.Runs++
		evs := h.GetEvents()
		for _, ev := range evs {
			s := ev.GetEventTime().AsTime().Unix()
			events[s]++
			row.EventsTotal++
			if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED {
				signals[s]++
				row.SignalsTotal++
			}
		}
		run = evs[0].GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId()
		if run == "" {
			break
		}
	}
	row.SignalsP99, row.SignalsPeak = perSecond(signals)
	row.signalSeries = series(signals)
	row.EventsP99, row.EventsPeak = perSecond(events)
	return nil
}

// perSecond is the p99 and the peak of per-second counts over the seconds
// from the first to the last that has any (quiet seconds count as 0).
func perSecond(by map[int64]int) (p99, peak int) {
	if len(by) == 0 {
		return 0, 0
	}
	lo, hi := int64(1<<62), int64(-1<<62)
	for s := range by {
		lo, hi = min(lo, s), max(hi, s)
	}
	var ds []time.Duration
	for s := lo; s <= hi; s++ {
		ds = append(ds, time.Duration(by[s]))
		peak = max(peak, by[s])
	}
	return int(Percentile(ds, 0.99)), peak
}

// FleetMarkdown is the fleet benchmark's table.
func FleetMarkdown(rows []FleetRow, command string, date time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Fleet-scale guards\n\n%s, `%s`.\n\n", date.UTC().Format("2006-01-02 15:04 UTC"), command)
	b.WriteString("Synthetic workers (each the guards and the guard link a real worker runs) on one dev server; calls spread ∝ 1/(i+1) over the workers; the endpoint fails from 5 s to 15 s; the least busy worker meets a 5 s rate limit at 22 s; a tenth more workers join at 27 s, and a tenth stop at the end, saying so (each joining one announces itself at a point of ReportEvery(workers), a worker's routine report interval, so a fleet started at once is heard at the routine rate). Propagation: p99 (max) over the workers from the first worker that had the change; a miss is a worker it never reached. Leaked: requests sent while the endpoint failed, more than 2 s after the trip was known anywhere, by a worker whose breaker was closed.\n\n")
	b.WriteString("| workers | trip p99 (max) | recovery p99 (max) | hold p99 (max) | worker count p99 (max); all counted after the join | leave p99 (max); all counted | missed | leaked | amplification | signals/s on the guard p99 (peak) | events/s p99 (peak) | guard runs | view reads/s (fleet) |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %d (+%d, −%d) | %s (%s) | %s (%s) | %s (%s) | %s (%s); %s | %s (%s); %s | %d/%d/%d/%d/%d | %d of %d (%.2f %%) | %.2f | %d (%d) | %d (%d) | %d | %.0f |\n",
			r.Workers, r.Joined, r.Left, fmtDur(r.Trip), fmtDur(r.TripMax), fmtDur(r.Recovery), fmtDur(r.RecoveryMax), fmtDur(r.Hold), fmtDur(r.HoldMax), fmtDur(r.Count), fmtDur(r.CountMax), fmtDur(r.Counted), fmtDur(r.Leave), fmtDur(r.LeaveMax), fmtDur(r.LeftCounted),
			r.TripMissed, r.RecoveryMissed, r.HoldMissed, r.CountMissed, r.LeaveMissed, r.Leaked, r.IncidentSends, r.LeakedPct(), r.Amplification(),
			r.SignalsP99, r.SignalsPeak, r.EventsP99, r.EventsPeak, r.Runs, r.ReadsPerSecond)
	}
	for _, r := range rows {
		if r.LeaveMissed > 0 {
			fmt.Fprintf(&b, "\nAt %d workers the smaller count (%d) missed %d workers: at the end of the wait they counted %v (count: workers), the guard's own view %d.\n",
				r.Workers, r.Workers+r.Joined-r.Left, r.LeaveMissed, r.LeftSeen, r.LeftGuardSaw)
		}
	}
	b.WriteString("\nTargets at 100 workers: propagation p99 ≤ 2 s, leaked ≤ 1 % of the incident's requests, ≤ 20 operations a second on any one workflow.\n")
	return b.String()
}
