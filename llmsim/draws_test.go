package llmsim_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/llmsim"
)

// numbered numbers the conversations "<client>-<i>" by i.
func numbered(conv string) (int, bool) {
	_, n, ok := strings.Cut(conv, "-")
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(n)
	return i, err == nil
}

// TestCallNumberDrawsPerRequest: with Options.CallNumber, two clients
// whose calls carry different keys and arrive in opposite orders meet the
// same fault and the same time to first token, call for call.
func TestCallNumberDrawsPerRequest(t *testing.T) {
	var mu sync.Mutex
	recs := map[string]llmsim.Record{}
	srv := startScenario(t, `
name: per-request
seed: 7
models:
  - {name: qwen-72b, ttft: {dist: lognormal, median: 2ms, sigma: 0.8, max: 40ms}, itl: 0s}
phases:
  - name: sick
    faults:
      - {kind: bad_gateway, probability: 0.5}
`, llmsim.Options{CallNumber: numbered, OnRequest: func(r llmsim.Record) {
		mu.Lock()
		recs[r.Conversation] = r
		mu.Unlock()
	}})
	const calls = 40
	send := func(client string, i int) int {
		cl, _ := goClient(srv, 5*time.Second, "Idempotency-Key", fmt.Sprintf("%s-%d/1", client, i))
		_, err := cl.CreateChatCompletion(context.Background(), ask("qwen-72b", fmt.Sprintf("question %s %d", client, i)))
		return status(err)
	}
	a, b := map[int]int{}, map[int]int{}
	for i := range calls {
		a[i] = send("a", i)
	}
	for i := calls - 1; i >= 0; i-- {
		b[i] = send("b", i)
		send("noise", 1000+i) // unnumbered traffic between them shifts nothing
	}
	failed := 0
	for i := range calls {
		if a[i] != b[i] {
			t.Errorf("call %d: client a got %d, client b %d", i, a[i], b[i])
		}
		if a[i] == 502 {
			failed++
		}
		ra, rb := recs[fmt.Sprintf("a-%d", i)], recs[fmt.Sprintf("b-%d", i)]
		if a[i] == 200 && ra.FirstToken != rb.FirstToken {
			t.Errorf("call %d: time to first token %s for a, %s for b", i, ra.FirstToken, rb.FirstToken)
		}
	}
	if failed < 5 || failed > calls-5 {
		t.Errorf("%d of %d calls failed at probability 0.5", failed, calls)
	}
}

// TestPauseServesWhenThePhaseEnds: a request that arrives in a pause
// phase gets nothing until the phase ends, then a normal answer; one whose
// client leaves first is dropped without generating.
func TestPauseServesWhenThePhaseEnds(t *testing.T) {
	srv := startScenario(t, `
name: pause
phases:
  - name: paused
    duration: 400ms
    faults:
      - {kind: pause}
  - {name: resumed}
`, llmsim.Options{})
	impatient, _ := goClient(srv, 100*time.Millisecond, "Idempotency-Key", "gone/1")
	patient, _ := goClient(srv, 5*time.Second, "Idempotency-Key", "served/1")
	errc := make(chan error, 1)
	go func() {
		_, err := impatient.CreateChatCompletion(context.Background(), ask("qwen-72b", "leaves"))
		errc <- err
	}()
	begin := time.Now()
	resp, err := patient.CreateChatCompletion(context.Background(), ask("qwen-72b", "waits"))
	took := time.Since(begin)
	if err != nil || resp.Choices[0].Message.Content == "" {
		t.Fatalf("paused request: %v", err)
	}
	if took < 300*time.Millisecond {
		t.Errorf("paused request answered after %s, before the phase ended", took)
	}
	if err := <-errc; err == nil {
		t.Errorf("a client that left during the pause got an answer")
	}
	begin = time.Now()
	if _, err := patient.CreateChatCompletion(context.Background(), ask("qwen-72b", "after")); err != nil || time.Since(begin) > 200*time.Millisecond {
		t.Errorf("after the pause: %v in %s", err, time.Since(begin))
	}
	st := srv.Stats()
	if st.Conversations["gone"].Attempts != 1 || st.Totals.Responses[llmsim.OutcomeClientGone] != 1 {
		t.Errorf("responses %v, conversations %v", st.Totals.Responses, st.Conversations)
	}
	for _, g := range srv.Generations("gone") {
		t.Errorf("the request whose client left generated %+v", g)
	}
}
