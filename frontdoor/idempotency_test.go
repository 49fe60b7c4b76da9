package frontdoor_test

import (
	"fmt"
	"testing"
	"time"

	openai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/require"

	"github.com/durable-llm/durable-llm/frontdoor"
	"github.com/durable-llm/durable-llm/testkit/rig"
)

// TestResilienceNamesIdempotencyWindow: x_resilience.idempotency says
// which window applied to the request and whether its answer is a replay.
// The same request under its derived key within replay_window is
// replayed (no second upstream request); after it, it is a new call. An
// explicit Idempotency-Key names key_window. Plain, streamed, and the
// Responses API alike.
func TestResilienceNamesIdempotencyWindow(t *testing.T) {
	const replay, key = 2 * time.Second, time.Hour
	d := newDoor(t, func(o *frontdoor.Options) { o.Client.ReplayWindow, o.Client.KeyWindow = replay, key })
	ctx := rig.Context(t, 2*time.Minute)
	oc := d.openai(tokAcme)
	derived := func(replayed bool) frontdoor.Idempotency {
		return frontdoor.Idempotency{Key: "derived", Window: "idempotency.replay_window", WindowMS: replay.Milliseconds(), Replayed: replayed}
	}
	explicit := func(replayed bool) frontdoor.Idempotency {
		return frontdoor.Idempotency{Key: "explicit", Window: "idempotency.key_window", WindowMS: key.Milliseconds(), Replayed: replayed}
	}
	idem := func(raw string) frontdoor.Idempotency {
		t.Helper()
		r := rig.Resilience(t, raw)
		require.NotNil(t, r.Idempotency, "%s", raw)
		return *r.Idempotency
	}

	q := fmt.Sprintf("When does my parcel arrive? (window %d)", time.Now().UnixNano())
	first, err := oc.Chat.Completions.New(ctx, params("u-window", q))
	require.NoError(t, err)
	require.Equal(t, derived(false), idem(first.RawJSON()), "the first request started the call")
	again, err := oc.Chat.Completions.New(ctx, params("u-window", q))
	require.NoError(t, err)
	require.Equal(t, derived(true), idem(again.RawJSON()), "the same request within replay_window is a replay")
	require.Equal(t, first.Choices[0].Message.Content, again.Choices[0].Message.Content)
	wid := rig.Resilience(t, first.RawJSON()).WorkflowID
	require.Equal(t, 1, d.Upstream(wid).Attempts, "a replay sends nothing upstream")

	time.Sleep(replay + time.Second)
	later, err := oc.Chat.Completions.New(ctx, params("u-window", q))
	require.NoError(t, err)
	require.Equal(t, derived(false), idem(later.RawJSON()), "after replay_window the same request is a new call")
	require.Equal(t, 2, d.Upstream(wid).Attempts, "the new call asked the model again")

	// Streamed: the last chunk's x_resilience says it.
	streamed := func() frontdoor.Idempotency {
		t.Helper()
		s := oc.Chat.Completions.NewStreaming(ctx, params("u-window", q+" (streamed)"))
		var last string
		for s.Next() {
			if c := s.Current(); len(c.Choices) > 0 && c.Choices[0].FinishReason != "" {
				last = c.RawJSON()
			}
		}
		require.NoError(t, s.Err())
		return idem(last)
	}
	require.Equal(t, derived(false), streamed())
	require.Equal(t, derived(true), streamed())

	// An explicit key: key_window.
	k := option.WithHeader("Idempotency-Key", fmt.Sprintf("window-%d", time.Now().UnixNano()))
	kf, err := oc.Chat.Completions.New(ctx, params("u-window", q+" (keyed)"), k)
	require.NoError(t, err)
	require.Equal(t, explicit(false), idem(kf.RawJSON()))
	ka, err := oc.Chat.Completions.New(ctx, params("u-window", q+" (keyed)"), k)
	require.NoError(t, err)
	require.Equal(t, explicit(true), idem(ka.RawJSON()))

	// The Responses API.
	p := responses.ResponseNewParams{Model: "auto", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(q + " (responses)")}}
	rf, err := oc.Responses.New(ctx, p)
	require.NoError(t, err)
	require.Equal(t, derived(false), idem(rf.RawJSON()))
	ra, err := oc.Responses.New(ctx, p)
	require.NoError(t, err)
	require.Equal(t, rf.ID, ra.ID)
	require.Equal(t, derived(true), idem(ra.RawJSON()))
	got, err := oc.Responses.Get(ctx, rf.ID, responses.ResponseGetParams{})
	require.NoError(t, err)
	require.Nil(t, rig.Resilience(t, got.RawJSON()).Idempotency, "a retrieve is no request's answer")
}
