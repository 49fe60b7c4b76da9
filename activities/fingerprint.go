package activities

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"
	"time"

	"github.com/durable-llm/durable-llm/policies/callstate"
	"github.com/durable-llm/durable-llm/policies/request"
)

// DuplicateWindow is how long an upstream request's fingerprint is
// remembered: the same request sent again within it is duplicate spend
// (README "Token accounting").
const DuplicateWindow = time.Hour

// maxFingerprints bounds the fingerprints a process remembers.
const maxFingerprints = 100_000

// fingerprint identifies an upstream request for billing: SHA-256 over
// who asks (tenant, user, session: two users asking the same question
// are two requests), the model, the messages as sent, the shape
// (max_tokens, temperature) and the fields that change the answer (tools,
// response format, sampling, passthrough).
func fingerprint(r request.Request, model string, msgs []request.Message, sh callstate.Shape) string {
	params := r
	params.Messages, params.IdempotencyKey, params.Stream, params.DeadlineMS = nil, "", false, 0
	b, _ := json.Marshal([]any{r.Tenant, r.UserID, r.SessionID, model, msgs, sh.MaxTokens, sh.Temperature, params})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// seenRequests remembers the fingerprints of the billed requests this
// process sent, for DuplicateWindow, oldest first in a queue so that
// forgetting costs nothing per request. Safe for concurrent use.
type seenRequests struct {
	mu    sync.Mutex
	at    map[string]time.Time
	queue []seenEntry
}

type seenEntry struct {
	fp string
	at time.Time
}

func newSeenRequests() *seenRequests { return &seenRequests{at: map[string]time.Time{}} }

// sent records fp as sent at now and reports whether it was sent before
// within DuplicateWindow.
func (s *seenRequests) sent(fp string, now time.Time) bool {
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
	s.queue = append(s.queue, seenEntry{fp: fp, at: now})
	return dup
}
