package frontdoor_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	openai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/require"

	"github.com/durable-llm/durable-llm/frontdoor"
	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/testkit/rig"
)

func backgroundParams(question string) responses.ResponseNewParams {
	return responses.ResponseNewParams{Model: "auto", Background: openai.Bool(true),
		Instructions: openai.String("You are a support agent."),
		Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String(question)}}
}

// pollUntil retrieves response id until its status is no longer queued or
// in_progress.
func pollUntil(t *testing.T, ctx context.Context, oc *openai.Client, id string) *responses.Response {
	t.Helper()
	var r *responses.Response
	require.Eventually(t, func() bool {
		var err error
		r, err = oc.Responses.Get(ctx, id, responses.ResponseGetParams{})
		require.NoError(t, err)
		return r.Status != responses.ResponseStatusQueued && r.Status != responses.ResponseStatusInProgress
	}, time.Minute, 100*time.Millisecond)
	return r
}

// TestBackgroundResponse: the official client creates a background
// response, which answers at once (queued, background), then polls it
// until it is completed with the call's answer; a response cut by the
// caller's max_output_tokens is incomplete with the reason; another
// tenant's response, and an unknown one, are 404 alike, for retrieve and
// cancel; cancelling a completed response returns it unchanged.
func TestBackgroundResponse(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	d := newDoor(t, nil)
	ctx := rig.Context(t, 2*time.Minute)
	oc := d.openai(tokAcme)

	var hr *http.Response
	start := time.Now()
	r, err := oc.Responses.New(ctx, backgroundParams("[[sim tokens=120]] Where is my order?"), option.WithResponseInto(&hr))
	require.NoError(t, err)
	require.Less(t, time.Since(start), 2*time.Second, "a background response answers before its call does (120 tokens take 3 s)")
	wid := hr.Header.Get("X-Workflow-Id")
	require.Equal(t, "resp_"+wid, r.ID)
	require.Equal(t, responses.ResponseStatusQueued, r.Status)
	require.True(t, r.Background)

	done := pollUntil(t, ctx, oc, r.ID)
	require.Equal(t, responses.ResponseStatusCompleted, done.Status, done.RawJSON())
	require.True(t, done.Background)
	res, err := (&llmclient.Client{Temporal: d.Client}).Result(ctx, wid)
	require.NoError(t, err)
	require.NotEmpty(t, res.Content)
	require.Equal(t, res.Content, done.OutputText())
	require.Positive(t, done.Usage.OutputTokens)

	// Cancelling a completed response returns it as it is.
	again, err := oc.Responses.Cancel(ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, responses.ResponseStatusCompleted, again.Status)
	require.Equal(t, res.Content, again.OutputText())

	t.Run("incomplete", func(t *testing.T) {
		p := backgroundParams("[[sim tokens=200]] Tell me everything.")
		p.MaxOutputTokens = openai.Int(20)
		r, err := oc.Responses.New(ctx, p)
		require.NoError(t, err)
		done := pollUntil(t, ctx, oc, r.ID)
		require.Equal(t, responses.ResponseStatusIncomplete, done.Status, done.RawJSON())
		require.Equal(t, "max_output_tokens", done.IncompleteDetails.Reason)
		require.NotEmpty(t, done.OutputText())
	})

	t.Run("tenants", func(t *testing.T) {
		foreign := d.openai(tokGlobex)
		_, err := foreign.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
		theirs := apiError(t, err)
		_, err = oc.Responses.Get(ctx, "resp_llm-"+strings.Repeat("0", 64), responses.ResponseGetParams{})
		unknown := apiError(t, err)
		for _, e := range []*openai.Error{theirs, unknown} {
			require.Equal(t, http.StatusNotFound, e.StatusCode)
			require.Equal(t, "response_not_found", e.Code)
		}
		_, err = foreign.Responses.Cancel(ctx, r.ID)
		require.Equal(t, http.StatusNotFound, apiError(t, err).StatusCode)
		s := foreign.Responses.GetStreaming(ctx, r.ID, responses.ResponseGetParams{})
		require.False(t, s.Next())
		require.Equal(t, http.StatusNotFound, apiError(t, s.Err()).StatusCode)
		// And the owner still reads it.
		mine, err := oc.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
		require.NoError(t, err)
		require.Equal(t, responses.ResponseStatusCompleted, mine.Status)
	})

	t.Run("store false", func(t *testing.T) {
		p := backgroundParams("A question not to keep.")
		p.Store = openai.Bool(false)
		_, err := oc.Responses.New(ctx, p)
		e := apiError(t, err)
		require.Equal(t, http.StatusBadRequest, e.StatusCode)
		require.Equal(t, "store", e.Param)
	})
}

// TestBackgroundResponseCancel: a background response whose model is slow
// is cancelled: the cancel answers cancelled, the call stops, and a
// retrieve says cancelled.
func TestBackgroundResponseCancel(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	d := newDoor(t, nil)
	ctx := rig.Context(t, 2*time.Minute)
	oc := d.openai(tokAcme)
	var hr *http.Response
	r, err := oc.Responses.New(ctx, backgroundParams("[[sim tokens=2000]] A long answer nobody will wait for."), option.WithResponseInto(&hr))
	require.NoError(t, err)
	wid := hr.Header.Get("X-Workflow-Id")
	require.Eventually(t, func() bool { return d.Upstream(wid).Attempts == 1 }, 30*time.Second, 50*time.Millisecond)
	running, err := oc.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
	require.NoError(t, err)
	require.Equal(t, responses.ResponseStatusInProgress, running.Status)

	c, err := oc.Responses.Cancel(ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, responses.ResponseStatusCancelled, c.Status)
	done := pollUntil(t, ctx, oc, r.ID)
	require.Equal(t, responses.ResponseStatusCancelled, done.Status, done.RawJSON())
	desc, err := d.Client.DescribeWorkflow(ctx, wid, "")
	require.NoError(t, err)
	require.Equal(t, "Canceled", desc.Status.String())
	// Cancelling again answers the same.
	c, err = oc.Responses.Cancel(ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, responses.ResponseStatusCancelled, c.Status)
}

// TestBackgroundStreamResumes: a streamed background response is left
// after a few deltas and resumed with starting_after, while the call runs
// and again after it ended: the deltas received add up to the final text,
// and no sequence number comes twice or out of order.
func TestBackgroundStreamResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	d := newDoor(t, nil)
	ctx := rig.Context(t, 2*time.Minute)
	oc := d.openai(tokAcme)

	type got struct {
		seqs   []int64
		text   strings.Builder
		deltas []string
		final  *responses.Response
		types  []string
		id     string
	}
	read := func(s interface {
		Next() bool
		Current() responses.ResponseStreamEventUnion
		Err() error
		Close() error
	}, g *got, stopAfterDeltas int) {
		t.Helper()
		deltas := 0
		for s.Next() {
			ev := s.Current()
			g.seqs = append(g.seqs, ev.SequenceNumber)
			g.types = append(g.types, ev.Type)
			switch ev.Type {
			case "response.output_text.delta":
				g.text.WriteString(ev.Delta)
				g.deltas = append(g.deltas, ev.Delta)
				deltas++
			case "response.created":
				g.id = ev.Response.ID
				require.True(t, ev.Response.Background)
				require.Equal(t, responses.ResponseStatusQueued, ev.Response.Status)
			case "response.completed":
				r := ev.Response
				g.final = &r
			}
			if stopAfterDeltas > 0 && deltas == stopAfterDeltas {
				require.NoError(t, s.Close())
				return
			}
		}
		require.NoError(t, s.Err())
	}
	// OpenAI numbers a response's events 0, 1, 2, …: each resumed stream
	// goes on from the number after the one it started after.
	requireConsecutive := func(seqs []int64) {
		t.Helper()
		for i := 1; i < len(seqs); i++ {
			require.Equal(t, seqs[i-1]+1, seqs[i], "sequence numbers %v", seqs)
		}
	}

	p := backgroundParams("[[sim tokens=200]] Tell me a long story.")
	var first got
	s := oc.Responses.NewStreaming(ctx, p)
	read(s, &first, 3)
	require.Equal(t, []string{"response.created", "response.in_progress"}, first.types[:2])
	require.Nil(t, first.final)
	id := first.id
	require.True(t, strings.HasPrefix(id, "resp_llm-"), id)
	last := first.seqs[len(first.seqs)-1]

	// Resume while the call runs.
	var rest got
	read(oc.Responses.GetStreaming(ctx, id, responses.ResponseGetParams{StartingAfter: openai.Int(last)}), &rest, 0)
	require.NotNil(t, rest.final, "no response.completed among %v", rest.types)
	require.Equal(t, responses.ResponseStatusCompleted, rest.final.Status)
	all := append(append([]int64{}, first.seqs...), rest.seqs...)
	require.Equal(t, int64(0), all[0])
	requireConsecutive(all)
	final := rest.final.OutputText()
	require.Equal(t, final, first.text.String()+rest.text.String())
	require.Greater(t, len(final), len(first.text.String()))
	polled, err := oc.Responses.Get(ctx, id, responses.ResponseGetParams{})
	require.NoError(t, err)
	require.Equal(t, final, polled.OutputText())

	// Resume after the call ended, from the first delta: the rest comes
	// from the result, numbered alike.
	firstDelta := first.seqs[2+2] // created, in_progress, item added, part added, delta
	var after got
	read(oc.Responses.GetStreaming(ctx, id, responses.ResponseGetParams{StartingAfter: openai.Int(firstDelta)}), &after, 0)
	require.NotNil(t, after.final, "no response.completed among %v", after.types)
	requireConsecutive(append([]int64{firstDelta}, after.seqs...))
	require.Equal(t, final, first.deltas[0]+after.text.String())
	require.Equal(t, rest.seqs[len(rest.seqs)-1], after.seqs[len(after.seqs)-1], "response.completed has one sequence number")

	// The whole stream again, from the start.
	var whole got
	read(oc.Responses.GetStreaming(ctx, id, responses.ResponseGetParams{}), &whole, 0)
	require.Equal(t, final, whole.text.String())
	require.Equal(t, int64(0), whole.seqs[0])
	requireConsecutive(whole.seqs)
	require.Equal(t, all, whole.seqs, "the whole stream is numbered as the live one was")
}

// TestBackgroundWithTypeScriptClient: background responses with the
// official OpenAI JavaScript client (testdata/openai-ts/background.mjs):
// create and poll with responses.retrieve, responses.cancel of a slow
// one, and a stream left after three deltas and resumed with
// retrieve(id, {stream: true, starting_after}).
func TestBackgroundWithTypeScriptClient(t *testing.T) {
	node, dir := requireTS(t, "the OpenAI JavaScript client", "openai")
	d := newDoor(t, nil)
	ctx := rig.Context(t, 2*time.Minute)
	out := runTS(t, ctx, node, dir, nil, "background.mjs", d.ts.URL+"/v1", tokAcme, "u-ts-background")
	var got struct {
		Polled struct {
			ID            string `json:"id"`
			CreatedStatus string `json:"created_status"`
			Background    bool   `json:"background"`
			Status        string `json:"status"`
			Text          string `json:"text"`
		} `json:"polled"`
		Cancelled struct {
			CancelStatus string `json:"cancel_status"`
			Status       string `json:"status"`
		} `json:"cancelled"`
		Resumed struct {
			ID        string  `json:"id"`
			Seqs      []int64 `json:"seqs"`
			Text      string  `json:"text"`
			FinalText string  `json:"final_text"`
			Status    string  `json:"status"`
		} `json:"resumed"`
	}
	require.NoError(t, json.Unmarshal(out, &got), string(out))

	client := &llmclient.Client{Temporal: d.Client}
	res, err := client.Result(ctx, strings.TrimPrefix(got.Polled.ID, "resp_"))
	require.NoError(t, err)
	require.Equal(t, "queued", got.Polled.CreatedStatus)
	require.True(t, got.Polled.Background)
	require.Equal(t, "completed", got.Polled.Status)
	require.Equal(t, res.Content, got.Polled.Text)

	require.Equal(t, "cancelled", got.Cancelled.CancelStatus)
	require.Equal(t, "cancelled", got.Cancelled.Status)

	r := got.Resumed
	require.Equal(t, "completed", r.Status, string(out))
	res, err = client.Result(ctx, strings.TrimPrefix(r.ID, "resp_"))
	require.NoError(t, err)
	require.Equal(t, res.Content, r.FinalText)
	require.Equal(t, res.Content, r.Text, "the deltas before and after the resume add up to the answer")
	for i, seq := range r.Seqs {
		require.Equal(t, int64(i), seq, "sequence numbers 0, 1, 2, … across the resume: %v", r.Seqs)
	}
}

// TestBackgroundStreamSurvivesFrontDoorRestart: a streamed background
// response left after three deltas is resumed with starting_after from a
// new front door process (the first one closed while the call streams):
// the resumed events repeat nothing and lose nothing.
func TestBackgroundStreamSurvivesFrontDoorRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	var opts *frontdoor.Options
	d := newDoor(t, func(o *frontdoor.Options) { opts = o })
	ctx := rig.Context(t, 2*time.Minute)

	var seqs []int64
	var text strings.Builder
	var id string
	s := d.openai(tokAcme).Responses.NewStreaming(ctx, backgroundParams("[[sim tokens=300]] Tell me a long story."))
	deltas := 0
	for deltas < 3 && s.Next() {
		ev := s.Current()
		seqs = append(seqs, ev.SequenceNumber)
		switch ev.Type {
		case "response.created":
			id = ev.Response.ID
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
			deltas++
		}
	}
	require.NoError(t, s.Close())
	require.Equal(t, 3, deltas)
	last := seqs[len(seqs)-1]

	// The front door goes away and another starts on the same Temporal.
	d.ts.CloseClientConnections()
	d.ts.Close()
	h, err := frontdoor.New(*opts)
	require.NoError(t, err)
	d.ts = httptest.NewServer(h)
	t.Cleanup(d.ts.Close)
	require.True(t, d.running(ctx, strings.TrimPrefix(id, "resp_")), "the call ended before the restart: make it longer")

	r := d.openai(tokAcme).Responses.GetStreaming(ctx, id, responses.ResponseGetParams{StartingAfter: openai.Int(last)})
	var final *responses.Response
	for r.Next() {
		ev := r.Current()
		require.Equal(t, seqs[len(seqs)-1]+1, ev.SequenceNumber, "sequence numbers %v then %d", seqs, ev.SequenceNumber)
		seqs = append(seqs, ev.SequenceNumber)
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.completed":
			resp := ev.Response
			final = &resp
		}
	}
	require.NoError(t, r.Err())
	require.NotNil(t, final)
	require.Equal(t, final.OutputText(), text.String())
}
