package workflowstreams

import (
	"encoding/base64"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	"google.golang.org/protobuf/proto"
)

// deterministic marshals a Payload's metadata map in key order, so the same
// payload always has the same wire text (workflow code publishes it, and a
// replay must produce the same bytes).
var deterministic = proto.MarshalOptions{Deterministic: true}

// EncodePayload turns a Payload into the protocol's item text: standard
// padded base64 of its protobuf encoding (what the TypeScript client calls
// encodePayloadWire).
func EncodePayload(p *commonpb.Payload) (string, error) {
	b, err := deterministic.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("workflowstreams: encode payload: %w", err)
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// DecodePayload is the inverse of EncodePayload.
func DecodePayload(s string) (*commonpb.Payload, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("workflowstreams: item data is not base64: %w", err)
	}
	p := &commonpb.Payload{}
	if err := proto.Unmarshal(b, p); err != nil {
		return nil, fmt.Errorf("workflowstreams: item data is not a Payload: %w", err)
	}
	return p, nil
}
