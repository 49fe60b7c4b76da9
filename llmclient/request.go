package llmclient

import (
	"context"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"

	"github.com/durable-llm/durable-llm/workflows"
)

// Request returns the request a call was started with: the input of its
// run's first history event (one history page read, whatever the call's
// length). dc decodes it (nil: the SDK's default data converter); a
// deployment that encrypts payloads passes its codec's converter.
func (c *Client) Request(ctx context.Context, dc converter.DataConverter, id, runID string) (workflows.CallRequest, error) {
	var req workflows.CallRequest
	if dc == nil {
		dc = converter.GetDefaultDataConverter()
	}
	it := c.Temporal.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return req, fmt.Errorf("LLM call %s: no history", id)
	}
	ev, err := it.Next()
	if err != nil {
		return req, fmt.Errorf("LLM call %s: read its history: %w", id, err)
	}
	attrs := ev.GetWorkflowExecutionStartedEventAttributes()
	if attrs == nil {
		return req, fmt.Errorf("LLM call %s: its first event is not the start", id)
	}
	if err := dc.FromPayloads(attrs.GetInput(), &req); err != nil {
		return req, fmt.Errorf("LLM call %s: decode its request (does this process have the workers' payload keys?): %w", id, err)
	}
	return req, nil
}
