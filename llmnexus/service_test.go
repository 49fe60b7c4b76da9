package llmnexus_test

import (
	"testing"

	"github.com/nexus-rpc/sdk-go/nexus"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporalnexus"

	"github.com/durable-llm/durable-llm/llmnexus"
)

func TestCallerNamespace(t *testing.T) {
	event := func(ns string) nexus.Link {
		return temporalnexus.ConvertLinkWorkflowEventToNexusLink(&commonpb.Link_WorkflowEvent{Namespace: ns, WorkflowId: "agent-1", RunId: "r",
			Reference: &commonpb.Link_WorkflowEvent_EventRef{EventRef: &commonpb.Link_WorkflowEvent_EventReference{
				EventId: 5, EventType: enumspb.EVENT_TYPE_NEXUS_OPERATION_SCHEDULED}}})
	}
	other := temporalnexus.ConvertLinkNexusOperationToNexusLink(&commonpb.Link_NexusOperation{Namespace: "spoof", OperationId: "x"})
	for _, tc := range []struct {
		name  string
		links []nexus.Link
		want  string
	}{
		{"the caller's workflow event", []nexus.Link{event("agents")}, "agents"},
		{"other links before it are passed by", []nexus.Link{other, event("agents")}, "agents"},
		{"no link: refused", nil, ""},
		{"only another kind of link: refused", []nexus.Link{other}, ""},
		{"an event link without a namespace: refused", []nexus.Link{event("")}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := llmnexus.CallerNamespace(tc.links)
			if tc.want == "" {
				var he *nexus.HandlerError
				require.ErrorAs(t, err, &he)
				require.Equal(t, nexus.HandlerErrorTypeBadRequest, he.Type)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}
