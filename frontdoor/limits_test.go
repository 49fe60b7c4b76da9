package frontdoor_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/durable-llm/durable-llm/frontdoor"
	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/testkit/rig"
)

// TestLimiterSteps steps one tenant's buckets through fixed instants: a
// request takes its request and its slot before its body is read (Enter)
// and its tokens once decoded (Charge); one refused after it was read
// has spent its request all the same.
func TestLimiterSteps(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	lim := frontdoor.Limits{RequestsPerMinute: 3, TokensPerMinute: 600, MaxInFlight: 2}
	l := frontdoor.NewLimiter(func(string) frontdoor.Limits { return lim })
	type step struct {
		name string
		at   time.Duration // after t0
		// tokens are charged once the request is entered; 0: the request
		// is refused before (invalid, say) and charges none.
		tokens int
		// hold keeps the slot (the call runs); else it is released.
		hold    bool
		refused string // the limit that refuses, "" for admitted
		after   time.Duration
	}
	for _, s := range []step{
		{name: "a full bucket", at: 0, tokens: 300},
		{name: "refused once read (invalid): its request is spent", at: 0},
		{name: "over the tokens left: refused, its request spent", at: 0, tokens: 350, refused: frontdoor.LimitTokens, after: 5 * time.Second},
		{name: "no request left: refused before its body, in 20 s", at: 0, refused: frontdoor.LimitRequests, after: 20 * time.Second},
		{name: "10 s later: still 10 s", at: 10 * time.Second, refused: frontdoor.LimitRequests, after: 10 * time.Second},
		{name: "over a minute's worth waits for a full bucket", at: 20 * time.Second, tokens: 5000, refused: frontdoor.LimitTokens, after: 10 * time.Second},
		{name: "and takes it", at: 40 * time.Second, tokens: 5000},
		{name: "both empty: named by the one that frees last", at: 40 * time.Second, refused: frontdoor.LimitRequests, after: 20 * time.Second},
		{name: "a call in flight", at: 100 * time.Second, tokens: 1, hold: true},
		{name: "a second", at: 100 * time.Second, tokens: 1, hold: true},
		{name: "a third: max_in_flight, before its body", at: 100 * time.Second, refused: frontdoor.LimitInFlight, after: frontdoor.InFlightRetryAfter},
	} {
		at := t0.Add(s.at)
		slot, ref := l.Enter("acme", at)
		if ref == nil && s.tokens > 0 {
			if ref = slot.Charge(s.tokens, at); ref != nil {
				slot.Release()
			}
		}
		switch {
		case s.refused == "" && ref != nil:
			t.Fatalf("%s: refused: %v", s.name, ref)
		case s.refused != "" && ref == nil:
			t.Fatalf("%s: admitted, want refused by %s", s.name, s.refused)
		case ref != nil:
			require.Equal(t, s.refused, ref.Limit, s.name)
			require.Equal(t, "acme", ref.Tenant, s.name)
			require.InDelta(t, s.after.Seconds(), ref.RetryAfter.Seconds(), 0.001, s.name)
		case !s.hold:
			slot.Release()
			slot.Release() // a second release does nothing
		}
	}
	require.Equal(t, 2, l.InFlight("acme"))
	require.Zero(t, l.InFlight("globex"), "tenants are counted apart")
	if _, ref := l.Enter("globex", t0); ref != nil {
		t.Fatalf("another tenant is refused by acme's load: %v", ref)
	}
}

// TestLimiterRefusalTakesNothing: a request refused before its body is
// read takes neither a request nor a slot.
func TestLimiterRefusalTakesNothing(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := frontdoor.NewLimiter(func(string) frontdoor.Limits { return frontdoor.Limits{RequestsPerMinute: 2, MaxInFlight: 1} })
	a, ref := l.Enter("acme", t0)
	require.Nil(t, ref)
	for range 3 {
		_, ref = l.Enter("acme", t0)
		require.NotNil(t, ref)
		require.Equal(t, frontdoor.LimitInFlight, ref.Limit)
	}
	a.Release()
	b, ref := l.Enter("acme", t0)
	require.Nil(t, ref, "the refused requests spent the second request")
	b.Release()
	_, ref = l.Enter("acme", t0.Add(10*time.Second))
	require.NotNil(t, ref)
	require.Equal(t, frontdoor.LimitRequests, ref.Limit)
	require.Equal(t, 20*time.Second, ref.RetryAfter)
}

// TestLimiterValidation: a tenant's requests are validated one at a time,
// each charging the time it took to validation_ms_per_minute; once that
// is spent its requests are refused, before their body is read and at
// their turn, until it refills, while another tenant validates.
func TestLimiterValidation(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := frontdoor.NewLimiter(func(string) frontdoor.Limits {
		return frontdoor.Limits{ValidationMSPerMinute: 60} // 1 ms a second
	})
	ctx := context.Background()
	at := func(ds ...time.Duration) func() time.Time {
		return func() time.Time {
			d := ds[0]
			ds = ds[1:]
			return t0.Add(d)
		}
	}

	p, ref := l.Enter("acme", t0)
	require.Nil(t, ref)
	q, ref := l.Enter("acme", t0)
	require.Nil(t, ref)
	end, ref, err := p.Validate(ctx, at(0, 100*time.Millisecond))
	require.NoError(t, err)
	require.Nil(t, ref)

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, _, err = q.Validate(canceled, at(0))
	require.ErrorIs(t, err, context.Canceled, "q validates while p does")
	g, _ := l.Enter("globex", t0)
	gEnd, ref, err := g.Validate(ctx, at(0, 0))
	require.NoError(t, err, "another tenant waits for acme's turn")
	require.Nil(t, ref)
	gEnd()

	end() // 100 ms of a 60 ms bucket: 40 ms owed
	_, ref, err = q.Validate(ctx, at(100*time.Millisecond))
	require.NoError(t, err)
	require.NotNil(t, ref, "q, entered before the budget was spent, is validated")
	require.Equal(t, frontdoor.LimitValidation, ref.Limit)
	require.Equal(t, 60, ref.Max)
	require.InDelta(t, 41, ref.RetryAfter.Seconds(), 0.001, "41 ms to refill at 1 ms a second")
	q.Release()
	p.Release()

	_, ref = l.Enter("acme", t0.Add(30*time.Second))
	require.NotNil(t, ref, "refused before its body is read")
	require.Equal(t, frontdoor.LimitValidation, ref.Limit)
	require.InDelta(t, 11.1, ref.RetryAfter.Seconds(), 0.001, "40 ms owed at 100 ms, 29.9 of them repaid")
	r, ref := l.Enter("acme", t0.Add(41*time.Second+100*time.Millisecond))
	require.Nil(t, ref, "the bucket holds a millisecond again")
	end, ref, err = r.Validate(ctx, at(41*time.Second+100*time.Millisecond, 41*time.Second+100*time.Millisecond))
	require.NoError(t, err)
	require.Nil(t, ref)
	end()
	r.Release()
}

// TestLimiterKeep: a call that runs on after its request keeps its slot
// until End; a second request for the same call keeps no second one.
func TestLimiterKeep(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := frontdoor.NewLimiter(func(string) frontdoor.Limits { return frontdoor.Limits{MaxInFlight: 2} })
	a, _ := l.Enter("acme", t0)
	require.True(t, a.Keep("llm-1"), "the first keeper watches the call")
	b, _ := l.Enter("acme", t0)
	require.False(t, b.Keep("llm-1"), "the same call is kept once")
	require.Equal(t, 1, l.InFlight("acme"))
	c, _ := l.Enter("acme", t0)
	_, ref := l.Enter("acme", t0)
	require.NotNil(t, ref, "the kept call and c fill max_in_flight")
	c.Release()
	l.End("acme", "llm-1")
	l.End("acme", "llm-1")
	require.Zero(t, l.InFlight("acme"))

	unlimited := frontdoor.NewLimiter(func(string) frontdoor.Limits { return frontdoor.Limits{} })
	s, _ := unlimited.Enter("acme", t0)
	require.False(t, s.Keep("llm-2"), "nothing to watch without an in-flight limit")
	require.Zero(t, unlimited.InFlight("acme"))
}

// offline is a front door whose Temporal is never reached: what it
// answers, it answers before a call starts.
func offline(t *testing.T, file string, mutate func(*frontdoor.Options)) *httptest.Server {
	t.Helper()
	tenants, err := frontdoor.ParseTokens(tokens)
	require.NoError(t, err)
	if file != "" {
		path := filepath.Join(t.TempDir(), "tenants.yaml")
		require.NoError(t, os.WriteFile(path, []byte(file), 0o600))
		tenants, err = frontdoor.LoadTenants(path)
		require.NoError(t, err)
	}
	c, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1"})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	o := frontdoor.Options{Client: &llmclient.Client{Temporal: c}, Tenants: tenants, StartTimeout: time.Second}
	if mutate != nil {
		mutate(&o)
	}
	h, err := frontdoor.New(o)
	require.NoError(t, err)
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts
}

// rawRequest writes head (request line and headers, without the blank
// line) and then body to a new connection, and returns the connection and
// a reader of it.
func rawRequest(t *testing.T, ts *httptest.Server, head, body string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", ts.Listener.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	_, err = io.WriteString(conn, strings.ReplaceAll(head, "\n", "\r\n")+"\r\n\r\n"+body)
	require.NoError(t, err)
	return conn, bufio.NewReader(conn)
}

// requireClosed reads the answer on conn and checks that the server then
// closes the connection (EOF) within a second, not waiting for the rest
// of the body.
func requireClosed(t *testing.T, conn net.Conn, br *bufio.Reader, status int) *http.Response {
	t.Helper()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err, "no answer")
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body = io.NopCloser(strings.NewReader(string(data)))
	require.Equal(t, status, resp.StatusCode, "%s", data)
	require.True(t, resp.Close, "no Connection: close")
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(time.Second)))
	_, err = br.ReadByte()
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server keeps the connection open after a %d, reading the rest of the body", status)
	}
	require.ErrorIs(t, err, io.EOF)
	return resp
}

// TestRefusalsCloseWithoutReadingTheBody: a request refused before its
// body is read (no or an unknown token, a wrong method, an unknown URL)
// is answered at once with Connection: close, and the server closes the
// connection instead of draining the body the client is still sending.
func TestRefusalsCloseWithoutReadingTheBody(t *testing.T) {
	ts := offline(t, "", nil)
	for _, tc := range []struct {
		name, head string
		status     int
	}{
		{"no token", "POST /v1/chat/completions HTTP/1.1\nHost: x\nContent-Length: 200000", http.StatusUnauthorized},
		{"unknown token", "POST /v1/chat/completions HTTP/1.1\nHost: x\nAuthorization: Bearer " + strings.Repeat("x", 40) + "\nContent-Length: 200000", http.StatusUnauthorized},
		{"wrong method", "PUT /v1/chat/completions HTTP/1.1\nHost: x\nContent-Length: 200000", http.StatusMethodNotAllowed},
		{"unknown URL", "POST /v1/nothing HTTP/1.1\nHost: x\nContent-Length: 200000", http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// 10 bytes of a 200,000-byte body, then nothing.
			conn, br := rawRequest(t, ts, tc.head, `{"model":`)
			requireClosed(t, conn, br, tc.status)
		})
	}
}

// TestSlowBodyIs408: a body that does not arrive within BodyTimeout is
// answered 408 and the connection closed; it does not hold the server.
func TestSlowBodyIs408(t *testing.T) {
	ts := offline(t, "", func(o *frontdoor.Options) { o.BodyTimeout = 300 * time.Millisecond })
	conn, br := rawRequest(t, ts, "POST /v1/chat/completions HTTP/1.1\nHost: x\nAuthorization: Bearer "+tokAcme+
		"\nContent-Type: application/json\nContent-Length: 2000", `{"model":"auto","messages":[`)
	start := time.Now()
	resp := requireClosed(t, conn, br, http.StatusRequestTimeout)
	require.Less(t, time.Since(start), 3*time.Second)
	var e struct {
		Error struct{ Code, Message string }
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
	require.Equal(t, "request_timeout", e.Error.Code)
	require.Contains(t, e.Error.Message, "300ms")
}

// post sends a chat completion with token, a question of about n bytes
// and max_tokens, and returns the status, the Retry-After and the error.
func post(t *testing.T, url, token string, n, maxTokens int) (int, string, string, string) {
	t.Helper()
	body := fmt.Sprintf(`{"model":"auto","max_tokens":%d,"messages":[{"role":"user","content":%q}]}`, maxTokens, strings.Repeat("word ", n/5))
	req, err := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var e struct {
		Error struct{ Type, Code, Message string }
	}
	_ = json.NewDecoder(resp.Body).Decode(&e)
	if resp.StatusCode == http.StatusTooManyRequests {
		require.True(t, resp.Close, "no Connection: close")
		require.Equal(t, "rate_limit_exceeded", e.Error.Code)
	}
	return resp.StatusCode, resp.Header.Get("Retry-After"), e.Error.Type, e.Error.Message
}

// TestOverTheRateIs429: over requests_per_minute or tokens_per_minute a
// tenant's call is answered 429 with Retry-After and an OpenAI-shaped
// error naming the limit and the tenant, before any call starts (this
// front door's Temporal is unreachable: a call that started would be a
// 503); another tenant is not held back.
func TestOverTheRateIs429(t *testing.T) {
	ts := offline(t, "defaults: {requests_per_minute: 2, tokens_per_minute: 3000}\ntenants:\n"+
		"  - name: acme\n    tokens: ["+tokAcme+"]\n"+
		"  - name: globex\n    tokens: ["+tokGlobex+"]\n    limits: {requests_per_minute: 100, tokens_per_minute: 0}\n", nil)

	// tokens: max_tokens 2000 + about 20 for the prompt; the second
	// call's 2,020 are more than the 1,000 or so left.
	status, _, _, msg := post(t, ts.URL, tokAcme, 50, 2000)
	require.Equal(t, http.StatusServiceUnavailable, status, "admitted, then Temporal unreachable: %s", msg)
	status, after, typ, msg := post(t, ts.URL, tokAcme, 50, 2000)
	require.Equal(t, http.StatusTooManyRequests, status, msg)
	require.Equal(t, "tokens", typ)
	require.Contains(t, msg, `tenant "acme" on tokens_per_minute: limit 3000 per minute`)
	secs, err := strconv.Atoi(after)
	require.NoError(t, err, "Retry-After %q", after)
	require.InDelta(t, 20, secs, 2, "about 1,000 tokens to wait for at 50 a second")

	// requests: the first call took one of two, and the one refused on
	// tokens the other: its body was read and estimated.
	status, after, typ, msg = post(t, ts.URL, tokAcme, 50, 10)
	require.Equal(t, http.StatusTooManyRequests, status, msg)
	require.Equal(t, "requests", typ)
	require.Contains(t, msg, `tenant "acme" on requests_per_minute: limit 2 per minute`)
	require.NotEmpty(t, after)

	for range 3 {
		status, _, _, msg = post(t, ts.URL, tokGlobex, 50, 2000)
		require.Equal(t, http.StatusServiceUnavailable, status, "globex is held back by acme's load: %s", msg)
	}
}

// TestTokensPerMinuteChargesWhatTheWorkerSends: a request that sets no
// max_tokens is charged the max_tokens the worker will send for it
// (limits.default_max_tokens, 4,096), not the policy's output reserve
// (256): two such requests do not fit in 6,000 tokens a minute.
func TestTokensPerMinuteChargesWhatTheWorkerSends(t *testing.T) {
	ts := offline(t, "defaults: {requests_per_minute: 100, tokens_per_minute: 6000}\ntenants:\n"+
		"  - name: acme\n    tokens: ["+tokAcme+"]\n", nil)
	status, _, _, msg := post(t, ts.URL, tokAcme, 50, 0)
	require.Equal(t, http.StatusServiceUnavailable, status, "admitted, then Temporal unreachable: %s", msg)
	status, _, typ, msg := post(t, ts.URL, tokAcme, 50, 0)
	require.Equal(t, http.StatusTooManyRequests, status, "a second request without max_tokens was admitted: %s", msg)
	require.Equal(t, "tokens", typ)
}

// invalid sends a chat completion that the front door refuses once it has
// read it (no messages) and returns the status and the error's message.
func invalid(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(`{"model":"auto","messages":[]}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var e struct {
		Error struct{ Code, Message string }
	}
	_ = json.NewDecoder(resp.Body).Decode(&e)
	return resp.StatusCode, e.Error.Message
}

// TestRefusedRequestsCountAgainstTheRate: requests the front door reads
// and refuses (here: invalid) spend the tenant's requests_per_minute as
// calls do, so a tenant whose every request is refused is held to its
// rate like any other; once it is spent the next request is 429 before
// its body is read, and another tenant is not held back.
func TestRefusedRequestsCountAgainstTheRate(t *testing.T) {
	ts := offline(t, "tenants:\n"+
		"  - name: acme\n    tokens: ["+tokAcme+"]\n    limits: {requests_per_minute: 3}\n"+
		"  - name: globex\n    tokens: ["+tokGlobex+"]\n", nil)
	for i := range 3 {
		status, msg := invalid(t, ts.URL, tokAcme)
		require.Equal(t, http.StatusBadRequest, status, "request %d: %s", i+1, msg)
	}
	status, msg := invalid(t, ts.URL, tokAcme)
	require.Equal(t, http.StatusTooManyRequests, status, "the three refused requests did not count: %s", msg)
	require.Contains(t, msg, `tenant "acme" on requests_per_minute: limit 3 per minute`)
	conn, br := rawRequest(t, ts, "POST /v1/chat/completions HTTP/1.1\nHost: x\nAuthorization: Bearer "+tokAcme+
		"\nContent-Type: application/json\nContent-Length: 200000", `{"model":`)
	requireClosed(t, conn, br, http.StatusTooManyRequests)
	for range 5 {
		status, msg = invalid(t, ts.URL, tokGlobex)
		require.Equal(t, http.StatusBadRequest, status, "globex is held back by acme's refusals: %s", msg)
	}
}

// TestValidationTimeCountsAgainstTheTenant: the time the front door takes
// to validate a tenant's requests, refused ones too, is charged to its
// validation_ms_per_minute: after one refused request with a large tool
// schema (compiled before the refusal) a tenant with 1 ms a minute is
// refused 429 before its next body is read, naming the limit; another
// tenant is not.
func TestValidationTimeCountsAgainstTheTenant(t *testing.T) {
	ts := offline(t, "tenants:\n"+
		"  - name: acme\n    tokens: ["+tokAcme+"]\n    limits: {validation_ms_per_minute: 1, requests_per_minute: 0}\n"+
		"  - name: globex\n    tokens: ["+tokGlobex+"]\n", nil)
	var props []string
	for i := range 4999 {
		props = append(props, fmt.Sprintf(`"%s_%d":{"type":"array","items":{"type":"string"}}`, uuid.NewString()[:8], i))
	}
	body := `{"model":"auto","temperature":7,"messages":[{"role":"user","content":"Look up my order."}],` +
		`"tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object","properties":{` + strings.Join(props, ",") + `}}}}]}`
	req, err := http.NewRequest(http.MethodPost, ts.URL+"/v1/chat/completions", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tokAcme)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "temperature 7 is refused")

	conn, br := rawRequest(t, ts, "POST /v1/chat/completions HTTP/1.1\nHost: x\nAuthorization: Bearer "+tokAcme+
		"\nContent-Type: application/json\nContent-Length: 200000", `{"model":`)
	resp = requireClosed(t, conn, br, http.StatusTooManyRequests)
	var e struct {
		Error struct{ Type, Code, Message string }
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
	require.Equal(t, "rate_limit_exceeded", e.Error.Code)
	require.Contains(t, e.Error.Message, `tenant "acme" on validation_ms_per_minute: limit 1 ms of validation per minute`)
	require.NotEmpty(t, resp.Header.Get("Retry-After"))

	status, msg := invalid(t, ts.URL, tokGlobex)
	require.Equal(t, http.StatusBadRequest, status, "globex is held back by acme's validations: %s", msg)
}

// TestReadingRunsUnderMaxInFlight: a request holds its tenant's slot in
// flight from before its body is read, so reading, decoding and
// validating it count against max_in_flight: while one request of acme
// (max_in_flight 1) is still sending its body, its next request is 429
// max_in_flight without being read, globex's are read; once the first is
// refused its slot is free again.
func TestReadingRunsUnderMaxInFlight(t *testing.T) {
	ts := offline(t, "tenants:\n"+
		"  - name: acme\n    tokens: ["+tokAcme+"]\n    limits: {max_in_flight: 1, requests_per_minute: 0}\n"+
		"  - name: globex\n    tokens: ["+tokGlobex+"]\n", nil)
	var slow net.Conn
	var slowAnswer *bufio.Reader
	sendSlow := func() {
		slow, slowAnswer = rawRequest(t, ts, "POST /v1/chat/completions HTTP/1.1\nHost: x\nAuthorization: Bearer "+tokAcme+
			"\nContent-Type: application/json\nContent-Length: 2000", `{"model":"auto","messages":[`)
	}
	// refused: the slow request was answered (429: one of the probes below
	// held acme's slot when the server read its headers).
	refused := func() bool {
		require.NoError(t, slow.SetReadDeadline(time.Now().Add(time.Millisecond)))
		_, err := slowAnswer.Peek(1)
		require.NoError(t, slow.SetReadDeadline(time.Time{}))
		return err == nil
	}
	sendSlow()
	// until sends acme's invalid requests until one is answered want (the
	// server may not have read the slow request's headers yet; a slow
	// request refused meanwhile is sent again), for at most 10 s, and
	// returns the last answer.
	until := func(want int) (int, string) {
		deadline := time.Now().Add(10 * time.Second)
		for {
			if want == http.StatusTooManyRequests && refused() {
				slow.Close()
				sendSlow()
			}
			status, msg := invalid(t, ts.URL, tokAcme)
			if status == want || time.Now().After(deadline) {
				return status, msg
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	status, msg := until(http.StatusTooManyRequests)
	require.Equal(t, http.StatusTooManyRequests, status, "acme's second request is read while its first is still arriving: %s", msg)
	require.Contains(t, msg, `tenant "acme" on max_in_flight: limit 1 calls in flight`)
	status, msg = invalid(t, ts.URL, tokGlobex)
	require.Equal(t, http.StatusBadRequest, status, "globex is held back by acme's slow body: %s", msg)

	slow.Close() // its body ends short: refused, the slot freed
	status, msg = until(http.StatusBadRequest)
	require.Equal(t, http.StatusBadRequest, status, "the refused request keeps its slot: %s", msg)
}

// TestAsyncCallsCountInFlight: a Prefer: respond-async call counts as in
// flight until it ends although its request has ended: with max_in_flight
// 1, a second call of the tenant is 429 while the first runs, another
// tenant's is not, and once the first has ended the tenant may call again.
func TestAsyncCallsCountInFlight(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	path := filepath.Join(t.TempDir(), "tenants.yaml")
	require.NoError(t, os.WriteFile(path, []byte("tenants:\n"+
		"  - name: acme\n    tokens: ["+tokAcme+"]\n    limits: {max_in_flight: 1}\n"+
		"  - name: globex\n    tokens: ["+tokGlobex+"]\n"), 0o600))
	tenants, err := frontdoor.LoadTenants(path)
	require.NoError(t, err)
	d := newDoor(t, func(o *frontdoor.Options) { o.Tenants = tenants })
	ctx := rig.Context(t, 2*time.Minute)

	async := func(token, question string) (int, string) {
		body := fmt.Sprintf(`{"model":"auto","messages":[{"role":"user","content":%q}]}`, question)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.ts.URL+"/v1/chat/completions", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Prefer", "respond-async")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get(frontdoor.HeaderWorkflowID)
	}
	// About 3 s of answer at qwen-72b's 40 tokens/s.
	status, id := async(tokAcme, "[[sim tokens=120]] Tell me about order 1 "+uuid.NewString())
	require.Equal(t, http.StatusAccepted, status)
	status, _ = async(tokAcme, "Tell me about order 2 "+uuid.NewString())
	require.Equal(t, http.StatusTooManyRequests, status, "the async call no longer counts once its 202 is sent")
	status, _ = async(tokGlobex, "Tell me about order 3 "+uuid.NewString())
	require.Equal(t, http.StatusAccepted, status)

	var res any
	require.NoError(t, d.Client.GetWorkflow(ctx, id, "").Get(ctx, &res))
	require.Eventually(t, func() bool {
		status, _ = async(tokAcme, "Tell me about order 4 "+uuid.NewString())
		return status == http.StatusAccepted
	}, 10*time.Second, 200*time.Millisecond, "the slot is not freed when the call ends")
}
