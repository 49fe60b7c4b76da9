package llmsim

import "math/rand/v2"

// What a random draw of plan decides; each has a stream of its own, so
// that one decision never shifts another.
const (
	drawTTFT = iota + 1
	drawDirective
	drawRule
	drawRuleLatency
	drawDelay
)

// draws hands out the random numbers of one request. Without a call
// number they all come, in turn, from the scenario's one seeded RNG: the
// outcome of a request then depends on how many requests came before it.
// With a call number (Options.CallNumber) each decision has its own
// stream, seeded by the scenario's seed, the call, the request's attempt
// within it and the decision: the n-th request of call i meets the same
// fault and the same latency whichever client sends it and whatever
// other requests arrive meanwhile, so several clients compared on one
// scenario meet the same schedule.
type draws struct {
	shared   *rand.Rand
	numbered bool
	key      uint64 // seed, call and attempt mixed
}

// draws returns the draws of the attempt-th request of conversation conv.
// The caller holds s.mu.
func (s *Sim) draws(conv string, attempt int) draws {
	d := draws{shared: s.rng}
	if s.callNumber == nil || conv == "" {
		return d
	}
	n, ok := s.callNumber(conv)
	if !ok {
		return d
	}
	d.numbered = true
	d.key = requestKey(s.sc.sc.Seed, n, attempt)
	return d
}

// requestKey mixes a scenario's seed, a call number and a request's
// attempt within the call into the key of that request's draws.
func requestKey(seed uint64, call, attempt int) uint64 {
	return mix64(mix64(seed^0x9e3779b97f4a7c15) ^ mix64(uint64(call)+0x632be59bd9b4e019) ^ uint64(attempt)*0xbf58476d1ce4e5b9)
}

// rng returns the stream of one decision: what, for rule j of phase i
// (0 where it does not apply).
func (d draws) rng(what, i, j int) *rand.Rand {
	if !d.numbered {
		return d.shared
	}
	return decisionStream(d.key, what, i, j)
}

func decisionStream(key uint64, what, i, j int) *rand.Rand {
	return rand.New(rand.NewPCG(key, mix64(uint64(what)<<40^uint64(i)<<20^uint64(j))))
}

// The decisions of a request whose draws RequestDraw gives.
const (
	// DrawFirstToken is the draw of a request's time to first token.
	DrawFirstToken = drawTTFT
	// DrawFault is the draw that decides whether a rule's fault hits a
	// request (a rule with a probability).
	DrawFault = drawRule
)

// RequestDraw is the random stream llmsim draws decision what from, for
// rule j of phase i (0 where it does not apply), for the attempt-th
// request of call in a scenario of seed drawn per request
// (Options.CallNumber): a benchmark computes from it what a request will
// meet without sending it.
func RequestDraw(seed uint64, call, attempt, what, i, j int) *rand.Rand {
	return decisionStream(requestKey(seed, call, attempt), what, i, j)
}

// mix64 is splitmix64's finalizer: a bijection that spreads every input
// bit over the output, so nearby call numbers get unrelated streams.
func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
