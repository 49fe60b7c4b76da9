package frontdoor_test

import (
	"testing"
	"time"

	openai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/require"

	"github.com/durable-llm/durable-llm/testkit/rig"
)

// TestQuickStartOpenAIGo runs README's first call through the front door
// with openai-go as README shows it. README's block connects to the front
// door of make run with acme's token from FRONTDOOR_TOKEN, as README's commands
// export it (the "connect:" line below); the test
// connects to its own front door and runs the rest as written. The docs
// package's TestQuickStartIsWhatTheTestsRun checks that README's block is
// these lines.
func TestQuickStartOpenAIGo(t *testing.T) {
	d := newDoor(t, nil)
	ctx := rig.Context(t, 2*time.Minute)

	// quick start: openai-go
	// connect: client := openai.NewClient(option.WithBaseURL("http://127.0.0.1:8080/v1/"), option.WithAPIKey(os.Getenv("FRONTDOOR_TOKEN")))
	client := openai.NewClient(option.WithBaseURL(d.ts.URL+"/v1/"), option.WithAPIKey(tokAcme))
	resp, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    "auto",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Where is my order?")},
	}, option.WithHeader("Idempotency-Key", "order-42"))
	// end quick start

	require.NoError(t, err)
	require.Len(t, resp.Choices, 1)
	require.Contains(t, resp.Choices[0].Message.Content, "Where is my order?")
	require.Contains(t, resp.RawJSON(), `"x_resilience"`)
	require.Contains(t, resp.RawJSON(), `"source":"model"`)
}
