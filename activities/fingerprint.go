package activities

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"
	"time"

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
// are two requests), the model, the messages as sent and max_tokens.
func fingerprint(r request.Request, model string, msgs []request.Message, maxTokens int) string {
	b, _ := json.Marshal([]any{r.Tenant, r.UserID, r.SessionID, model, msgs, maxTokens})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// seenRequests remembers the fingerprints this process sent, for
// DuplicateWindow. Safe for concurrent use.
type seenRequests struct {
	mu    sync.Mutex
	at    map[string]time.Time
	swept time.Time // when expired fingerprints were last removed
}

func newSeenRequests() *seenRequests { return &seenRequests{at: map[string]time.Time{}} }

// sent records fp as sent at now and reports whether it was sent before
// within DuplicateWindow.
func (s *seenRequests) sent(fp string, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev, ok := s.at[fp]
	dup := ok && now.Sub(prev) < DuplicateWindow
	if len(s.at) >= maxFingerprints || now.Sub(s.swept) > DuplicateWindow {
		for k, t := range s.at {
			if now.Sub(t) >= DuplicateWindow {
				delete(s.at, k)
			}
		}
		s.swept = now
		if len(s.at) >= maxFingerprints {
			clear(s.at) // a flood of distinct requests: forget rather than grow
		}
	}
	s.at[fp] = now
	return dup
}
