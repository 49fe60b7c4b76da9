package frontdoor_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/durable-llm/durable-llm/frontdoor"
	"github.com/durable-llm/durable-llm/policies/prompt"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/testkit/rig"
)

// tokLimited is a tenant allowed one request a minute.
const tokLimited = "tok-limited-5e7a9c1e3b5d7f9a1c3e5a7c9e1b3d5f"

// anthropicFailure is an error as Anthropic's client surfaces it.
type anthropicFailure struct {
	Status     int     `json:"status"`
	Type       string  `json:"type"`
	Message    string  `json:"message"`
	Envelope   string  `json:"envelope"`
	RetryAfter *string `json:"retry_after"`
}

// TestAnthropicClientThroughTheDoor: Anthropic's official TypeScript
// client (testdata/openai-ts, pinned in its package-lock.json) pointed at
// the front door creates a message and streams one (the streamed text is
// the final message's), runs a tool-use loop streamed and not, counts a
// prompt's tokens as the worker counts them, and reads the door's errors
// in Anthropic's envelope: a missing max_tokens, a bad key, an unknown
// model, a tenant over its limit.
func TestAnthropicClientThroughTheDoor(t *testing.T) {
	node, dir := requireTS(t, "Anthropic's TypeScript client", "@anthropic-ai", "sdk")
	d := newDoor(t, func(o *frontdoor.Options) {
		tn, err := frontdoor.ParseTenantsFile([]byte("tenants:\n"+
			"  - name: acme\n    tokens: ["+tokAcme+"]\n"+
			"  - name: limited\n    tokens: ["+tokLimited+"]\n    limits: {requests_per_minute: 1}\n"), "test")
		require.NoError(t, err)
		o.Tenants = tn
	})
	raw := runTS(t, rig.Context(t, 3*time.Minute), node, dir, nil, "anthropic.mjs", d.ts.URL, tokAcme, "u-anthropic", tokLimited)
	var got struct {
		Created struct {
			ID, Type, Role, Model, Text string
			StopReason                  string `json:"stop_reason"`
			Usage                       struct {
				InputTokens  int `json:"input_tokens"`
				OutputTokens int `json:"output_tokens"`
			}
			Source string
		}
		Streamed struct {
			Text, Final string
			StopReason  string `json:"stop_reason"`
			Events      []string
		}
		Tools         anthropicTools `json:"tools"`
		ToolsStreamed anthropicTools `json:"tools_streamed"`
		Count         int
		NoMaxTokens   anthropicFailure `json:"no_max_tokens"`
		BadKey        anthropicFailure `json:"bad_key"`
		UnknownModel  anthropicFailure `json:"unknown_model"`
		OverLimit     anthropicFailure `json:"over_limit"`
	}
	require.NoError(t, json.Unmarshal(raw, &got), string(raw))

	c := got.Created
	require.True(t, strings.HasPrefix(c.ID, "msg_"), "id %q", c.ID)
	require.Equal(t, "message", c.Type)
	require.Equal(t, "assistant", c.Role)
	require.Equal(t, "qwen-72b", c.Model)
	require.Contains(t, c.Text, "[qwen-72b]")
	require.Equal(t, "end_turn", c.StopReason)
	require.Positive(t, c.Usage.InputTokens)
	require.Positive(t, c.Usage.OutputTokens)
	require.Equal(t, "model", c.Source, "x_resilience says who answered")

	s := got.Streamed
	require.NotEmpty(t, s.Text)
	require.Equal(t, s.Final, s.Text, "the streamed text is the final message's")
	require.Equal(t, "end_turn", s.StopReason)
	for _, ev := range []string{"message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"} {
		require.Contains(t, s.Events, ev)
	}

	for name, tl := range map[string]anthropicTools{"plain": got.Tools, "streamed": got.ToolsStreamed} {
		require.Equal(t, "tool_use", tl.FirstStop, name)
		require.Equal(t, "lookup_order", tl.Tool, name)
		require.Equal(t, map[string]any{"order_id": "42"}, tl.Input, name)
		require.NotEmpty(t, tl.ID, name)
		require.Equal(t, "end_turn", tl.SecondStop, name)
		require.Contains(t, tl.SecondText, "shipped on Monday", name)
	}

	tc, err := prompt.NewTokenCounter(d.Config.Pruning.Encoding)
	require.NoError(t, err)
	want := tc.CountMessages([]request.Message{{Role: "system", Content: "You are a support agent."}, {Role: "user", Content: "When will my parcel arrive?"}})
	require.Equal(t, want, got.Count, "count_tokens counts as the worker counts")

	for _, f := range []struct {
		name   string
		got    anthropicFailure
		status int
		typ    string
		says   string
	}{
		{"no max_tokens", got.NoMaxTokens, 400, "invalid_request_error", "max_tokens"},
		{"bad key", got.BadKey, 401, "authentication_error", "API key"},
		{"unknown model", got.UnknownModel, 404, "not_found_error", "claude-unknown"},
		{"over its limit", got.OverLimit, 429, "rate_limit_error", "requests_per_minute"},
	} {
		require.Equal(t, f.status, f.got.Status, f.name)
		require.Equal(t, "error", f.got.Envelope, f.name)
		require.Equal(t, f.typ, f.got.Type, f.name)
		require.Contains(t, f.got.Message, f.says, f.name)
	}
	require.NotNil(t, got.OverLimit.RetryAfter, "a 429 says when to come back")
}

// anthropicTools is what the client saw of a tool-use loop.
type anthropicTools struct {
	FirstStop  string         `json:"first_stop"`
	Tool       string         `json:"tool"`
	Input      map[string]any `json:"input"`
	ID         string         `json:"id"`
	SecondStop string         `json:"second_stop"`
	SecondText string         `json:"second_text"`
}
