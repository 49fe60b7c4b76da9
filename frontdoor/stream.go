package frontdoor

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/durable-llm/durable-llm/workflows"
)

// stream answers stream: true. The answer of a durable call exists only
// once the call ends, so it is sent as chunks then; meanwhile the stream
// carries SSE comments so that proxies and clients do not time out while
// the call retries. A call that ends within the first KeepAlive is
// answered with a proper status code (a 400 for an invalid request);
// after that the 200 is committed and a failure is sent as an SSE error
// event, which the official clients raise as an error.
func (h *Handler) stream(w http.ResponseWriter, r *http.Request, run client.WorkflowRun, cr chatRequest, created time.Time) {
	id := run.GetID()
	type outcome struct {
		res workflows.CallResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		var o outcome
		o.err = run.Get(r.Context(), &o.res)
		done <- o
	}()

	sw := &sseWriter{w: w, rc: http.NewResponseController(w), id: completionID(id), created: created.Unix()}
	first := time.NewTimer(h.o.KeepAlive)
	defer first.Stop()
	select {
	case o := <-done:
		if o.err != nil {
			if r.Context().Err() == nil {
				h.callFailed(id, o.err).write(w)
			}
			return
		}
		w.Header().Set(HeaderSource, string(o.res.Source))
		w.Header().Set(HeaderDegraded, strconv.FormatBool(o.res.Degraded))
		sw.commit()
		sw.role(modelOf(o.res))
		sw.answer(id, o.res, cr.IncludeUsage)
		return
	case <-first.C:
	case <-r.Context().Done():
		return // the client left; the call goes on
	}

	// Still running: commit the 200 now and keep the connection busy.
	w.Header().Set("Trailer", HeaderSource+", "+HeaderDegraded)
	sw.commit()
	model := cr.Model
	if model == "" || model == AutoModel {
		model = h.models[0]
	}
	sw.role(model)
	sw.comment("keep-alive")
	tick := time.NewTicker(h.o.KeepAlive)
	defer tick.Stop()
	for {
		select {
		case o := <-done:
			if o.err != nil {
				if r.Context().Err() == nil {
					sw.error(h.callFailed(id, o.err))
				}
				return
			}
			sw.answer(id, o.res, cr.IncludeUsage)
			w.Header().Set(HeaderSource, string(o.res.Source))
			w.Header().Set(HeaderDegraded, strconv.FormatBool(o.res.Degraded))
			return
		case <-tick.C:
			if sw.comment("keep-alive") != nil {
				return // the client left; the call goes on
			}
		case <-r.Context().Done():
			return
		}
	}
}

// sseWriter writes chat.completion.chunk events.
type sseWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	id      string
	created int64
	err     error
}

func (s *sseWriter) commit() {
	hd := s.w.Header()
	hd.Set("Content-Type", "text/event-stream; charset=utf-8")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	s.w.WriteHeader(http.StatusOK)
}

func (s *sseWriter) raw(text string) error {
	if s.err != nil {
		return s.err
	}
	if _, err := fmt.Fprint(s.w, text); err != nil {
		s.err = err
		return err
	}
	if err := s.rc.Flush(); err != nil {
		s.err = err
	}
	return s.err
}

func (s *sseWriter) comment(text string) error { return s.raw(": " + text + "\n\n") }

func (s *sseWriter) data(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.raw("data: " + string(b) + "\n\n")
}

func (s *sseWriter) chunk(model string, d delta, finish *string) chunk {
	return chunk{ID: s.id, Object: "chat.completion.chunk", Created: s.created, Model: model,
		Choices: []chunkChoice{{Delta: d, Logprobs: jsonNull, FinishReason: finish}}}
}

// role sends the first chunk: the assistant role and empty content.
func (s *sseWriter) role(model string) {
	empty := ""
	_ = s.data(s.chunk(model, delta{Role: "assistant", Content: &empty}, nil))
}

// answer sends the content chunks, the final chunk (finish_reason and
// x_resilience), the usage chunk when asked for, and [DONE].
func (s *sseWriter) answer(id string, res workflows.CallResult, includeUsage bool) {
	model := modelOf(res)
	for _, piece := range splitContent(res.Content) {
		if s.data(s.chunk(model, delta{Content: &piece}, nil)) != nil {
			return
		}
	}
	finish := finishReasonOf(res)
	last := s.chunk(model, delta{}, &finish)
	rs := resilienceOf(id, StatusCompleted, res)
	last.Resilience = &rs
	_ = s.data(last)
	if includeUsage {
		u := usageOf(res)
		_ = s.data(chunk{ID: s.id, Object: "chat.completion.chunk", Created: s.created, Model: model,
			Choices: []chunkChoice{}, Usage: &u})
	}
	_ = s.raw("data: [DONE]\n\n")
}

// error sends a failure after the 200 was committed, as OpenAI does: an
// event whose data is the error body, and no [DONE].
func (s *sseWriter) error(e *apiError) { _ = s.data(e.body()) }
