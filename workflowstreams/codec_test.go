package workflowstreams

import (
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
)

// The wire texts below were produced by @temporalio/workflow-streams 1.23.0's
// encodePayloadWire(defaultPayloadConverter.toPayload(value)); the Go side
// must produce the same text for the same value (the cross-language test
// checks the same thing end to end).
func TestEncodePayloadMatchesTypeScript(t *testing.T) {
	dc := converter.GetDefaultDataConverter()
	for _, tc := range []struct {
		value any
		wire  string
	}{
		{"hello", "ChYKCGVuY29kaW5nEgpqc29uL3BsYWluEgciaGVsbG8i"},
		{map[string]any{"n": 1, "s": "x"}, "ChYKCGVuY29kaW5nEgpqc29uL3BsYWluEg97Im4iOjEsInMiOiJ4In0="},
		{42, "ChYKCGVuY29kaW5nEgpqc29uL3BsYWluEgI0Mg=="},
	} {
		p, err := dc.ToPayload(tc.value)
		require.NoError(t, err)
		got, err := EncodePayload(p)
		require.NoError(t, err)
		require.Equal(t, tc.wire, got, "value %v", tc.value)

		back, err := DecodePayload(tc.wire)
		require.NoError(t, err)
		require.Equal(t, p.GetData(), back.GetData())
		require.Equal(t, p.GetMetadata(), back.GetMetadata())
	}
}

// Two metadata keys: TypeScript writes them in insertion order, Go in key
// order; both decode to the same payload, and Go's text is stable.
func TestEncodePayloadMultipleMetadataKeys(t *testing.T) {
	p := &commonpb.Payload{
		Metadata: map[string][]byte{"encoding": []byte("json/plain"), "b": []byte("v")},
		Data:     []byte("1"),
	}
	first, err := EncodePayload(p)
	require.NoError(t, err)
	for range 20 {
		again, err := EncodePayload(p)
		require.NoError(t, err)
		require.Equal(t, first, again)
	}
	fromTS, err := DecodePayload("ChYKCGVuY29kaW5nEgpqc29uL3BsYWluCgYKAWISAXYSATE=")
	require.NoError(t, err)
	require.Equal(t, p.GetMetadata(), fromTS.GetMetadata())
	require.Equal(t, p.GetData(), fromTS.GetData())
}

func TestDecodePayloadRejectsGarbage(t *testing.T) {
	_, err := DecodePayload("not base64!")
	require.ErrorContains(t, err, "not base64")
	_, err = DecodePayload("/////w==") // base64, but not a protobuf message
	require.ErrorContains(t, err, "not a Payload")
}
