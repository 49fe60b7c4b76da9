package prompt

import (
	"math"
	"slices"
	"strings"

	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/request"
)

// Shape is how one attempt cuts the conversation.
type Shape struct {
	Stage      int     // pruning stage (0: full history), as PruneForAttempt
	KeepRounds int     // >0: keep only the newest N rounds (overrides Stage)
	Factor     float64 // share kept per stage (config pruning.factor, 0.5)
	Window     int     // model context window in tokens; <=0 unknown: no fitting
	Reserve    int     // tokens kept free for the answer
	Support    config.SystemPromptSupport
}

// Fitted is what an attempt sends: Build(msgs, Keep, Support).
type Fitted struct {
	Keep   []int // indexes into the original messages that are sent, ascending
	Before int   // len(original messages)
	Tokens int   // prompt tokens of the sent (adapted) messages: exact, or an upper-bound estimate
	Exact  bool  // Tokens came from the tokenizer
	Fits   bool  // Tokens + Reserve <= Window (always true for an unknown window)
}

// Estimate margins, measured by TestEstimateTokensBounds against
// cl100k_base and o200k_base (the only encodings Fit estimates for; with
// the others it counts every message):
//
//	estUpper(e) = e + e/8 + 3 ≥ the real count of every text of the corpus
//	estLower(e) = e/2 - 3     ≤ the real count (cl100k_base) of natural
//	                            text (prose, code, JSON, logs, Chinese,
//	                            other scripts, emoji, digits)
//	estFloor(e) = e/16        ≤ the real count of every text of the
//	                            corpus, whitespace floods and runs of
//	                            repeated characters too
//
// fitJoinUp and fitJoinDown bound what wrapping the question in the system
// prompt as a role (WrapQuestion) adds beyond the two texts and one token.
const (
	estUpperDiv = 8
	estUpperAdd = 3
	estLowerSub = 3
	estFloorDiv = 16

	fitJoinUp   = 12
	fitJoinDown = 2

	// fitExactShare: when estimates leave a decision open, Fit counts
	// exactly at most 1/fitExactShare of the prompt's estimated tokens
	// (the tokenizer is ~25–40 times slower than the estimate, so this
	// keeps Fit within about twice the cost of estimating).
	fitExactShare = 40
)

func estUpper(e int) int {
	if e == 0 {
		return 0
	}
	return e + e/estUpperDiv + estUpperAdd
}

func estLower(e int) int {
	if e == 0 {
		return 0
	}
	return max(1, e/2-estLowerSub)
}

func estFloor(e int) int {
	if e == 0 {
		return 0
	}
	return max(1, e/estFloorDiv)
}

// fitMsg is what one message costs in the sent prompt: bounds until it
// is counted, then its exact count (up, low and floor equal, except for
// the slack of a folded system text).
type fitMsg struct {
	up, low, floor int
	est            int  // estimated tokens: what counting it costs
	exact          bool // up/low/floor are from the tokenizer (or final)
	folded         bool // a system text folded into a user message
}

// Fit decides which messages one attempt sends, counting each message at
// most once and exactly only where an estimate cannot settle the choice
// ("Fitting" in the package documentation says how). The stage (or
// KeepRounds) caps the rounds kept; with a known window the oldest whole
// rounds are dropped until Tokens + Reserve ≤ Window, where Tokens is an
// upper bound until the messages are counted, so an estimate never pushes
// a prompt over the window. Fits is false only when the system part and
// the current question alone do not fit, and Keep then holds just them.
//
// The adapted prompt is what is measured. A nil tc counts with
// EstimateTokens (Exact is then false); with an encoding whose bounds were
// not measured every message is counted.
func Fit(msgs []request.Message, s Shape, tc *TokenCounter) Fitted {
	l := pruneParse(msgs)
	n := len(l.starts)
	k0 := n
	switch {
	case s.KeepRounds > 0:
		k0 = min(s.KeepRounds, n)
	case s.Stage > 0:
		k0 = stageRounds(n, s.Stage, s.Factor)
	}
	cut := func(k int) int {
		if k <= 0 {
			return l.tail
		}
		return l.starts[n-k]
	}
	f := fitter{msgs: msgs, l: l, tc: tc, support: s.Support, firstSent: cut(k0)}
	f.init()

	res := Fitted{Before: len(msgs), Fits: true}
	k := k0
	if s.Window > 0 {
		avail := s.Window - max(s.Reserve, 0)
		k = f.decide(k0, avail, cut)
		if k < 0 {
			res.Fits = false
			k = 0
		}
	}
	c := cut(k)
	res.Keep = make([]int, 0, l.sysEnd+len(msgs)-c)
	for i := range l.sysEnd {
		res.Keep = append(res.Keep, i)
	}
	for i := c; i < len(msgs); i++ {
		res.Keep = append(res.Keep, i)
	}
	res.Tokens, _, _ = f.cost(c)
	res.Exact = f.exactAt(c)
	if !res.Exact && tc != nil && f.countedAt(c) && f.foldAt(c) && f.estAt(c) <= f.countBudget {
		// Everything is counted but the folded system text: count the
		// adapted prompt itself.
		res.Tokens = tc.CountMessages(Build(msgs, res.Keep, s.Support))
		res.Exact = true
	}
	if s.Window > 0 {
		res.Fits = res.Tokens+max(s.Reserve, 0) <= s.Window
	}
	return res
}

// stageRounds is how many rounds of n PruneForAttempt keeps at stage.
func stageRounds(n, stage int, factor float64) int {
	if stage >= LastPruneStage {
		return 0
	}
	if !(factor > 0 && factor <= 1) {
		factor = DefaultPruneFactor
	}
	x := math.Pow(factor, float64(stage)) * float64(n)
	if x < 0.5 {
		return 0
	}
	// The epsilon keeps float noise (5.000000001) from keeping a round more.
	return int(math.Ceil(x - 1e-9))
}

type fitter struct {
	msgs        []request.Message
	l           pruneLayout
	tc          *TokenCounter
	support     config.SystemPromptSupport
	firstSent   int // messages before firstSent (after the system part) are never sent
	fold        bool
	m           []fitMsg
	countBudget int // estimated tokens left to count exactly

	// Suffix sums over msgs[c:] (c ≥ firstSent) and sums over the system part.
	sufUp, sufLow, sufFloor, sufEst []int
	sufUnc, sufFold, sufUser        []int // uncounted, folded, user messages
	sysUp, sysLow, sysFloor, sysEst int
	sysUnc, sysFold                 int
}

func (f *fitter) sent(i int) bool { return i < f.l.sysEnd || i >= f.firstSent }

func (f *fitter) init() {
	f.fold = f.support == config.SystemPromptPartial || f.support == config.SystemPromptNone
	f.m = make([]fitMsg, len(f.msgs))
	exactMode := f.tc != nil && !f.tc.bounded
	lower := estLower
	if f.tc != nil && !f.tc.tight {
		lower = estFloor
	}
	total := 0
	for i := range f.msgs {
		if !f.sent(i) {
			continue
		}
		m := &f.m[i]
		msg := &f.msgs[i]
		m.folded = f.fold && msg.Instructs() && !IsSummary(*msg)
		switch {
		case m.folded && (f.support == config.SystemPromptNone || strings.TrimSpace(msg.Text()) == ""):
			m.exact, m.folded = true, false // dropped: costs nothing
		case m.folded:
			e := EstimateTokens(msg.Text())
			m.est = e
			m.up, m.low, m.floor = estUpper(e)+1+fitJoinUp, lower(e)+1-fitJoinDown, estFloor(e)+1-fitJoinDown
		default:
			role := msg.Role
			if f.fold && IsSummary(*msg) {
				role = request.RoleUser // sent as a user message
			}
			fixed := TokensPerMessage + f.tc.roleTokens(role) + imageTokens(*msg)
			m.est = fixed
			m.up, m.low, m.floor = fixed, fixed, fixed
			add := func(s string) {
				e := EstimateTokens(s)
				m.est += e
				m.up += estUpper(e)
				m.low += lower(e)
				m.floor += estFloor(e)
			}
			add(msg.Text())
			if msg.Name != "" {
				m.up, m.low, m.floor = m.up+TokensPerName, m.low+TokensPerName, m.floor+TokensPerName
				add(msg.Name)
			}
			for _, c := range msg.ToolCalls {
				m.up, m.low, m.floor = m.up+TokensPerToolCall, m.low+TokensPerToolCall, m.floor+TokensPerToolCall
				add(c.Function.Name)
				add(c.Function.Arguments)
			}
			if f.tc == nil { // the estimate is the count
				e := tokMessage(*msg, EstimateTokens)
				m.up, m.low, m.floor, m.exact = e, e, e, true
			}
		}
		m.low, m.floor = max(m.low, 0), max(m.floor, 0)
		total += m.est
		if exactMode && !m.exact {
			f.count(i)
		}
	}
	f.countBudget = total / fitExactShare
	f.sums()
}

// count counts message i exactly.
func (f *fitter) count(i int) {
	m := &f.m[i]
	if m.folded {
		x := f.tc.Count(f.msgs[i].Text())
		m.up, m.low, m.floor = x+1+fitJoinUp, max(x+1-fitJoinDown, 0), max(x+1-fitJoinDown, 0)
	} else {
		x := f.tc.CountMessage(f.msgs[i])
		m.up, m.low, m.floor = x, x, x
	}
	m.exact = true
	f.countBudget -= m.est
}

// sums recomputes the suffix and system-part sums.
func (f *fitter) sums() {
	n := len(f.msgs)
	if f.sufUp == nil {
		f.sufUp, f.sufLow, f.sufFloor, f.sufEst = make([]int, n+1), make([]int, n+1), make([]int, n+1), make([]int, n+1)
		f.sufUnc, f.sufFold, f.sufUser = make([]int, n+1), make([]int, n+1), make([]int, n+1)
	}
	f.sysUp, f.sysLow, f.sysFloor, f.sysEst, f.sysUnc, f.sysFold = 0, 0, 0, 0, 0, 0
	for i := range f.l.sysEnd {
		m := f.m[i]
		f.sysUp += m.up
		f.sysLow += m.low
		f.sysFloor += m.floor
		f.sysEst += m.est
		f.sysUnc += b2i(!m.exact)
		f.sysFold += b2i(m.folded && m.up > 0)
	}
	for i := n - 1; i >= f.firstSent && i >= f.l.sysEnd; i-- {
		m := f.m[i]
		f.sufUp[i] = f.sufUp[i+1] + m.up
		f.sufLow[i] = f.sufLow[i+1] + m.low
		f.sufFloor[i] = f.sufFloor[i+1] + m.floor
		f.sufEst[i] = f.sufEst[i+1] + m.est
		f.sufUnc[i] = f.sufUnc[i+1] + b2i(!m.exact)
		f.sufFold[i] = f.sufFold[i+1] + b2i(m.folded && m.up > 0)
		f.sufUser[i] = f.sufUser[i+1] + b2i(!m.folded && f.msgs[i].Role == request.RoleUser)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// cost returns the bounds of the adapted prompt made of the system part
// and msgs[c:].
func (f *fitter) cost(c int) (up, low, floor int) {
	if f.l.sysEnd == 0 && c >= len(f.msgs) {
		return 0, 0, 0
	}
	up = TokensReplyPriming + f.sysUp + f.sufUp[c]
	low = TokensReplyPriming + f.sysLow + f.sufLow[c]
	floor = TokensReplyPriming + f.sysFloor + f.sufFloor[c]
	if f.foldAt(c) {
		// Each folded text was charged a joiner; the joined text has one
		// fewer when it becomes its own user message or fills an empty one.
		low, floor = low-1, floor-1
		if f.sufUser[c] == 0 { // no user message: the text becomes one
			x := TokensPerMessage + f.tc.roleTokens(request.RoleUser)
			up, low, floor = up+x, low+x, floor+x
		}
	}
	return up, low, floor
}

func (f *fitter) foldAt(c int) bool    { return f.sysFold+f.sufFold[c] > 0 }
func (f *fitter) countedAt(c int) bool { return f.sysUnc+f.sufUnc[c] == 0 }
func (f *fitter) estAt(c int) int      { return f.sysEst + f.sufEst[c] }
func (f *fitter) exactAt(c int) bool {
	return f.tc != nil && f.countedAt(c) && !f.foldAt(c)
}

// decide returns the number of rounds to keep (at most k0) so that the
// prompt surely fits avail tokens, or -1 if the system part and the
// question do not fit.
func (f *fitter) decide(k0, avail int, cut func(int) int) int {
	// The system part and the question.
	c0 := cut(0)
	if up, _, floor := f.cost(c0); up > avail {
		if floor > avail {
			return -1
		}
		// Count them exactly, largest first, until settled.
		for _, i := range f.uncounted(c0) {
			f.count(i)
			f.sums()
			up, _, floor = f.cost(c0)
			if up <= avail || floor > avail {
				break
			}
		}
		if up > avail {
			return -1
		}
	}
	// kUp surely fits; kLow may fit.
	kUp, kLow := 0, 0
	for k := k0; k > 0; k-- {
		up, low, _ := f.cost(cut(k))
		if kLow == 0 && low <= avail {
			kLow = k
		}
		if up <= avail {
			kUp = k
			break
		}
	}
	// Settle kUp+1, kUp+2, … by counting, within the budget.
	for j := kUp + 1; j <= kLow && f.countBudget > 0; j++ {
		c := cut(j)
		for {
			up, low, _ := f.cost(c)
			if up <= avail {
				kUp = j
				break
			}
			if low > avail {
				return kUp
			}
			i := f.nextToCount(c)
			if i < 0 {
				return kUp
			}
			f.count(i)
			f.sums()
		}
	}
	return kUp
}

// uncounted returns the sent messages of the prompt cut at c that are not
// counted yet, the most uncertain first.
func (f *fitter) uncounted(c int) []int {
	var idx []int
	for i := range f.msgs {
		if (i < f.l.sysEnd || i >= c) && !f.m[i].exact {
			idx = append(idx, i)
		}
	}
	slices.SortFunc(idx, func(a, b int) int {
		return (f.m[b].up - f.m[b].low) - (f.m[a].up - f.m[a].low)
	})
	return idx
}

// nextToCount returns the most uncertain uncounted message of the prompt
// cut at c that the budget can pay for, or -1.
func (f *fitter) nextToCount(c int) int {
	best, bestGap := -1, 0
	for i := range f.msgs {
		if (i < f.l.sysEnd || i >= c) && !f.m[i].exact && f.m[i].est <= f.countBudget {
			if gap := f.m[i].up - f.m[i].low; gap > bestGap {
				best, bestGap = i, gap
			}
		}
	}
	return best
}

// Build returns the messages to send: copies of msgs[keep...] adapted to
// support (AdaptMessages). It needs no tokenizer and never mutates msgs.
func Build(msgs []request.Message, keep []int, support config.SystemPromptSupport) []request.Message {
	out := make([]request.Message, 0, len(keep))
	for _, i := range keep {
		out = append(out, pruneCopy(msgs[i]))
	}
	return adaptOwned(out, support)
}
