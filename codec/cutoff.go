package codec

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"
)

// EnvPlaintextCutoff is the environment variable that holds the plaintext
// cut-off: an RFC 3339 time ("2025-07-01T00:00:00Z") or a date
// ("2025-07-01", midnight UTC). A workflow started after it must have
// every payload it reads encrypted; a plaintext one (a call started by a
// client without the payload keys, or one forged by anyone with write
// access to the namespace) is refused. Set it to the time encryption was
// switched on. Empty: plaintext payloads are always read.
const EnvPlaintextCutoff = "LLM_PAYLOAD_PLAINTEXT_CUTOFF"

// ErrPlaintext is returned when a workflow started after the plaintext
// cut-off reads a payload that is not encrypted.
var ErrPlaintext = errors.New("plaintext payload refused")

// ParseCutoff reads the value of EnvPlaintextCutoff: RFC 3339, or a date
// (midnight UTC); empty is the zero time (no cut-off).
func ParseCutoff(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%s: want an RFC 3339 time such as 2025-07-01T00:00:00Z or a date such as 2025-07-01, got %q", EnvPlaintextCutoff, s)
}

// WithPlaintextCutoff returns a copy of c whose data converter refuses,
// in every workflow started after t, a payload that is not encrypted: the
// workflow's input (the call fails with ErrPlaintext and says why), a
// signal, an update or a query argument. Payloads of workflows started
// before t, and every payload outside a workflow, are read as before. The
// zero t turns the check off.
func (c *Codec) WithPlaintextCutoff(t time.Time) *Codec {
	cp := *c
	cp.cutoff = t
	return &cp
}

// PlaintextCutoff is the cut-off set by WithPlaintextCutoff (zero: none).
func (c *Codec) PlaintextCutoff() time.Time { return c.cutoff }

// dataConverter is the SDK's codec data converter made aware of the
// workflow it decodes for, so that the plaintext cut-off can apply to the
// workflow's start time. The SDK binds it to the workflow context when it
// decodes a workflow's input, signals, updates and queries.
type dataConverter struct {
	converter.DataConverter
	c *Codec
}

var _ converter.ContextAware = (*dataConverter)(nil)

// WithWorkflowContext implements converter.ContextAware: in a workflow
// started after the cut-off, decoding refuses plaintext payloads.
func (d *dataConverter) WithWorkflowContext(ctx workflow.Context) converter.DataConverter {
	if d.c.cutoff.IsZero() {
		return d
	}
	info := workflow.GetInfo(ctx)
	if !info.WorkflowStartTime.After(d.c.cutoff) {
		return d
	}
	strict := &strictCodec{Codec: d.c, workflowType: info.WorkflowType.Name, started: info.WorkflowStartTime}
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), strict)
}

// WithContext implements converter.ContextAware: outside a workflow the
// converter is unchanged.
func (d *dataConverter) WithContext(context.Context) converter.DataConverter { return d }

// strictCodec is c in a workflow started after the cut-off.
type strictCodec struct {
	*Codec
	workflowType string
	started      time.Time
}

// Decode refuses the batch when any payload is not encrypted.
func (s *strictCodec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	for i, p := range payloads {
		if string(p.GetMetadata()[converter.MetadataEncoding]) != EncodingEncrypted {
			return payloads, fmt.Errorf("%w: payload %d of %d read by a %s workflow is not encrypted; the workflow started at %s, after the plaintext cut-off %s (%s), so whatever it reads must be written with the payload keys (%s): start calls through a client that has them",
				ErrPlaintext, i+1, len(payloads), s.workflowType, s.started.UTC().Format(time.RFC3339), s.cutoff.UTC().Format(time.RFC3339), EnvPlaintextCutoff, EnvKeys)
		}
	}
	return s.Codec.Decode(payloads)
}
