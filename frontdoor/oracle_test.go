package frontdoor_test

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	openai "github.com/openai/openai-go/v3"
	oshared "github.com/openai/openai-go/v3/shared"
	"github.com/stretchr/testify/require"

	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/testkit/rig"
)

// TestNoKeyOracleInWhatTenantsRead runs the key-recovery attack of a
// hostile tenant: a strict tool whose pattern the model's arguments fail,
// arguments the model fills from the question, and questions that carry
// candidate 8-character strings, some of them pieces of the upstream's API
// key. Reasons used to quote the failing arguments through a mask that
// answered, piece by piece, which candidates belong to the key. Now a
// question with a piece of the key and one without get the same words
// back, and nothing a tenant reads holds the key or a mask.
func TestNoKeyOracleInWhatTenantsRead(t *testing.T) {
	const keyEnv = "DURABLE_LLM_ORACLE_TEST_KEY"
	key := "sk-proj-Q7vLx2Rb9TmK4wZp8NcY3hJd"
	t.Setenv(keyEnv, key)
	d := newDoorOn(t, rig.Options{Policy: func(cfg *config.Config) {
		cfg.OverrideEndpoint(cfg.Models[0].BaseURL, keyEnv)
	}}, nil)
	ctx := rig.Context(t, 2*time.Minute)
	oc := d.openai(tokAcme)
	strict := openai.ChatCompletionFunctionTool(oshared.FunctionDefinitionParam{
		Name:   "lookup",
		Strict: openai.Bool(true),
		Parameters: oshared.FunctionParameters{
			"type": "object", "additionalProperties": false, "required": []string{"q"},
			"properties": map[string]any{"q": map[string]any{"type": "string", "pattern": "^x$"}},
		},
	})
	// What a tenant reads of one probe: the error's message and every
	// reason in x_resilience, with the probe's own words and the call's
	// identity taken out.
	probe := func(candidate string) (string, []byte) {
		p := openai.ChatCompletionNewParams{
			Model: "auto", User: openai.String("u-oracle"),
			Messages:   []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Look up " + candidate + " please")},
			Tools:      []openai.ChatCompletionToolUnionParam{strict},
			ToolChoice: openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")},
		}
		_, err := oc.Chat.Completions.New(ctx, p)
		e := apiError(t, err)
		body, rerr := io.ReadAll(e.Response.Body)
		require.NoError(t, rerr)
		require.Equal(t, http.StatusServiceUnavailable, e.StatusCode, string(body))
		r := rig.Resilience(t, string(body))
		require.NotEmpty(t, r.Attempts)
		require.Equal(t, "bad_tool_call", r.Attempts[0].Class, "the arguments fail the tool's pattern")
		words := []string{e.Message, r.Reason}
		for _, a := range r.Attempts {
			words = append(words, a.Class, a.Decision, a.Reason, a.Diagnosis)
		}
		seen := strings.Join(words, "\n")
		seen = strings.ReplaceAll(seen, r.WorkflowID, "<id>")
		seen = regexp.MustCompile(`\d+(\.\d+)? ?(ms|s)\b`).ReplaceAllString(seen, "<t>")
		return seen, body
	}
	notKey := "notakeyx"
	base, _ := probe(notKey)
	require.NotContains(t, base, notKey, "a reason quotes the model's arguments")
	for i := 0; i+8 <= len(key); i += 8 {
		piece := key[i : i+8]
		got, body := probe(piece)
		require.Equal(t, base, got, "a question with %q, a piece of the key, reads differently from one without", piece)
		require.NotContains(t, string(body), "[redacted]")
		for j := 0; j+8 <= len(key); j++ {
			require.NotContains(t, string(body), key[j:j+8], "a piece of the key is in what the tenant reads")
		}
		var raw map[string]any
		require.NoError(t, json.Unmarshal(body, &raw), "the error body is JSON")
	}
}
