package codec_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-llm/durable-llm/codec"
	"github.com/durable-llm/durable-llm/workflows"
)

// plainStarter is a client without the payload keys: it writes plaintext
// payloads; it reads, and the worker decodes, with the worker's converter.
type plainStarter struct{ worker converter.DataConverter }

func (p plainStarter) ToPayload(v any) (*commonpb.Payload, error) {
	return converter.GetDefaultDataConverter().ToPayload(v)
}

func (p plainStarter) ToPayloads(v ...any) (*commonpb.Payloads, error) {
	return converter.GetDefaultDataConverter().ToPayloads(v...)
}

func (p plainStarter) FromPayload(pl *commonpb.Payload, v any) error {
	return p.worker.FromPayload(pl, v)
}

func (p plainStarter) FromPayloads(pls *commonpb.Payloads, v ...any) error {
	return p.worker.FromPayloads(pls, v...)
}

func (p plainStarter) ToString(pl *commonpb.Payload) string { return p.worker.ToString(pl) }

func (p plainStarter) ToStrings(pls *commonpb.Payloads) []string { return p.worker.ToStrings(pls) }

func (p plainStarter) WithWorkflowContext(ctx workflow.Context) converter.DataConverter {
	return p.worker.(converter.ContextAware).WithWorkflowContext(ctx)
}

func (p plainStarter) WithContext(context.Context) converter.DataConverter { return p }

// TestPlaintextInputAfterTheCutoffIsRefused: with encryption on and a
// cut-off set, a call whose input was written without the keys after the
// cut-off (a forged or misconfigured start) fails with a clear error; one
// started before it, or encrypted, runs.
func TestPlaintextInputAfterTheCutoffIsRefused(t *testing.T) {
	cut := time.Date(2025, 7, 1, 0, 0, 0, 0, time.UTC)
	worker := mustCodec(t, k1).WithPlaintextCutoff(cut)
	for _, tc := range []struct {
		name      string
		start     time.Time
		encrypted bool
		refused   bool
	}{
		{"plaintext after the cut-off", cut.Add(time.Hour), false, true},
		{"plaintext before the cut-off", cut.Add(-time.Hour), false, false},
		{"encrypted after the cut-off", cut.Add(time.Hour), true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			env.SetStartTime(tc.start)
			var dc converter.DataConverter = worker.DataConverter()
			if !tc.encrypted {
				dc = plainStarter{worker: dc}
			}
			env.SetDataConverter(dc)
			env.RegisterWorkflowWithOptions(func(ctx workflow.Context, req workflows.CallRequest) (string, error) {
				return req.Messages[0].Content, nil
			}, workflow.RegisterOptions{Name: workflows.WorkflowName})
			env.ExecuteWorkflow(workflows.WorkflowName, sampleRequest())
			require.True(t, env.IsWorkflowCompleted())
			err := env.GetWorkflowError()
			if !tc.refused {
				require.NoError(t, err)
				var got string
				require.NoError(t, env.GetWorkflowResult(&got))
				require.Equal(t, prompt, got)
				return
			}
			require.Error(t, err, "a plaintext input written after the cut-off was read")
			require.ErrorContains(t, err, "plaintext payload refused")
			require.ErrorContains(t, err, "after the plaintext cut-off 2025-07-01T00:00:00Z")
			require.ErrorContains(t, err, codec.EnvPlaintextCutoff)
			require.NotContains(t, err.Error(), "4242", "the error quotes the refused input")
		})
	}
}

func TestPlaintextCutoffFromEnv(t *testing.T) {
	env := map[string]string{codec.EnvKeys: "k1:" + b64(secret(1)), codec.EnvPlaintextCutoff: "2025-07-01"}
	c, err := codec.FromEnv(func(k string) string { return env[k] })
	require.NoError(t, err)
	require.Equal(t, time.Date(2025, 7, 1, 0, 0, 0, 0, time.UTC), c.PlaintextCutoff())

	env[codec.EnvPlaintextCutoff] = "last tuesday"
	_, err = codec.FromEnv(func(k string) string { return env[k] })
	require.ErrorContains(t, err, "want an RFC 3339 time")

	env[codec.EnvPlaintextCutoff], env[codec.EnvKeys] = "2025-07-01T12:00:00+02:00", ""
	_, err = codec.FromEnv(func(k string) string { return env[k] })
	require.ErrorContains(t, err, "needs payload encryption")
}
