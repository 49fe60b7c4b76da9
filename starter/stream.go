package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/workflows"
)

// askStream is ask --stream: it starts (or attaches to) the call with
// stream: true and prints the answer's text as it arrives, each attempt
// event on a line of its own in brackets, then the usual summary. With
// asJSON it prints one JSON line per stream item ({"offset":…,"delta":…}
// or {"offset":…,"event":…}; offset -1 for what came from the result once
// the stream had closed), then {"result":…}.
func askStream(ctx context.Context, lc *llmclient.Client, req workflows.CallRequest, asJSON bool, out io.Writer) error {
	req.Stream = true
	run, err := lc.Start(ctx, req)
	if err != nil {
		return err
	}
	id := run.GetID()
	p := &streamPrinter{w: out, enc: json.NewEncoder(out), json: asJSON}
	if !asJSON {
		fmt.Fprintf(os.Stderr, "call %s started; streaming…\n", id)
	}
	res, err := lc.Follow(ctx, id, 0, "", p.item)
	if err != nil {
		p.endLine()
		return fmt.Errorf("%w\n  see %s", err, lc.UILink(id))
	}
	if asJSON {
		return p.enc.Encode(struct {
			Result workflows.CallResult `json:"result"`
		}{res})
	}
	p.endLine()
	// The summary of ask without the answer, which was printed already.
	res.Content = ""
	var b bytes.Buffer
	if err := llmclient.WriteReport(&b, res); err != nil {
		return err
	}
	fmt.Fprintf(out, "\n%s", strings.TrimLeft(b.String(), "\n"))
	fmt.Fprintf(out, "\nWeb UI:   %s\n", lc.UILink(id))
	return nil
}

// streamPrinter prints stream items as they arrive.
type streamPrinter struct {
	w       io.Writer
	enc     *json.Encoder
	json    bool
	midLine bool // the text printed last did not end its line
}

// jsonItem is a stream item as a JSON line.
type jsonItem struct {
	Offset int64            `json:"offset"`
	Delta  *workflows.Delta `json:"delta,omitempty"`
	Event  *workflows.Event `json:"event,omitempty"`
}

func (p *streamPrinter) item(it llmclient.StreamItem) error {
	if p.json {
		return p.enc.Encode(jsonItem{Offset: it.Offset, Delta: it.Delta, Event: it.Event})
	}
	switch {
	case it.Delta != nil && it.Delta.Text != "":
		if _, err := io.WriteString(p.w, it.Delta.Text); err != nil {
			return err
		}
		p.midLine = !strings.HasSuffix(it.Delta.Text, "\n")
	case it.Event != nil:
		line := it.Event.String()
		if line == "" {
			return nil
		}
		p.endLine()
		if _, err := fmt.Fprintf(p.w, "[%s]\n", line); err != nil {
			return err
		}
	}
	return nil
}

// endLine ends the line of text being printed, if any.
func (p *streamPrinter) endLine() {
	if p.midLine {
		_, _ = io.WriteString(p.w, "\n")
		p.midLine = false
	}
}
