package activities

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"io"
	"math"
	"sync"
	"time"

	"github.com/durable-llm/durable-llm/policies/callstate"
	"github.com/durable-llm/durable-llm/policies/request"
)

// DuplicateWindow is how long an upstream request's fingerprint is
// remembered: the same request sent again within it is duplicate spend
// (docs/operating.md "API keys").
const DuplicateWindow = time.Hour

// maxFingerprints bounds the fingerprints a process remembers.
const maxFingerprints = 100_000

// fingerprint identifies an upstream request for billing: SHA-256 over
// who asks (tenant, user, session: two users asking the same question
// are two requests), the model, the messages as sent, the shape
// (max_tokens, temperature) and the fields that change the answer (tools,
// response format, sampling, passthrough).
//
// The messages, most of its bytes, are hashed field by field, each string
// with its length in front (so no two requests share their bytes), with no
// JSON built on the decision path; the other fields (small) are hashed as
// their JSON. TestFingerprintGolden pins the bytes: the same on every
// replay and every build.
func fingerprint(r request.Request, model string, msgs []request.Message, sh callstate.Shape) string {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	num := func(v int64) { h.Write(n[:binary.PutVarint(n[:], v)]) }
	str := func(s string) { num(int64(len(s))); io.WriteString(h, s) }
	str("fp2") // the scheme
	for _, s := range []string{r.Tenant, r.UserID, r.SessionID, model} {
		str(s)
	}
	num(int64(len(msgs)))
	for _, m := range msgs {
		str(m.Role)
		str(m.Content)
		str(m.Name)
		str(m.ToolCallID)
		num(int64(len(m.Parts)))
		for _, p := range m.Parts {
			str(p.Type)
			str(p.Text)
			if p.ImageURL != nil {
				str(p.ImageURL.URL)
				str(p.ImageURL.Detail)
			} else {
				num(-1)
			}
		}
		num(int64(len(m.ToolCalls)))
		for _, c := range m.ToolCalls {
			str(c.ID)
			str(c.Type)
			str(c.Function.Name)
			str(c.Function.Arguments)
		}
	}
	num(int64(sh.MaxTokens))
	if sh.Temperature != nil {
		num(int64(math.Float64bits(*sh.Temperature)))
	} else {
		num(-1)
	}
	params := r
	params.Messages, params.IdempotencyKey, params.Stream, params.DeadlineMS = nil, "", false, 0
	params.Tenant, params.UserID, params.SessionID = "", "", ""
	b, _ := json.Marshal(params)
	str(string(b))
	return hex.EncodeToString(h.Sum(nil))
}

// billedRequests remembers the fingerprints of the billed requests this
// process sent, for DuplicateWindow, oldest first in a queue so that
// forgetting costs nothing per request. Safe for concurrent use.
type billedRequests struct {
	mu    sync.Mutex
	at    map[string]time.Time
	queue []billedEntry
}

type billedEntry struct {
	fp string
	at time.Time
}

func newBilledRequests() *billedRequests { return &billedRequests{at: map[string]time.Time{}} }

// repeat records fp as billed at now and reports whether it was billed
// before within DuplicateWindow.
func (s *billedRequests) repeat(fp string, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Forget the expired, and the oldest beyond the bound.
	for len(s.queue) > 0 && (now.Sub(s.queue[0].at) >= DuplicateWindow || len(s.queue) >= maxFingerprints) {
		e := s.queue[0]
		s.queue = s.queue[1:]
		if t, ok := s.at[e.fp]; ok && t.Equal(e.at) {
			delete(s.at, e.fp)
		}
	}
	prev, ok := s.at[fp]
	dup := ok && now.Sub(prev) < DuplicateWindow
	s.at[fp] = now
	s.queue = append(s.queue, billedEntry{fp: fp, at: now})
	return dup
}
