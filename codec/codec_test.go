package codec_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/durable-llm/durable-llm/codec"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/workflows"
)

// secret returns a fixed 32-byte key whose bytes all equal b.
func secret(b byte) []byte { return bytes.Repeat([]byte{b}, codec.KeySize) }

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func mustCodec(t *testing.T, keys ...codec.Key) *codec.Codec {
	t.Helper()
	c, err := codec.New(keys...)
	require.NoError(t, err)
	return c
}

var (
	k1 = codec.Key{ID: "k1", Secret: secret(1)}
	k2 = codec.Key{ID: "k2", Secret: secret(2)}
)

const prompt = "My card ending 4242 was charged twice for order 77-ALPHA"

func sampleRequest() workflows.CallRequest {
	return workflows.CallRequest{UserID: "u-1", SessionID: "s-1", Scenario: "customer_service",
		Messages: []request.Message{{Role: "user", Content: prompt}}}
}

func TestRoundTripThroughTheDataConverter(t *testing.T) {
	dc := mustCodec(t, k1).DataConverter()
	p, err := dc.ToPayload(sampleRequest())
	require.NoError(t, err)
	require.Equal(t, codec.EncodingEncrypted, string(p.Metadata[converter.MetadataEncoding]))
	require.Equal(t, "k1", string(p.Metadata[codec.MetadataKeyID]))
	require.NotContains(t, string(p.Data), "4242", "the prompt is readable in the encrypted payload")
	require.NotContains(t, string(p.Data), "json/plain", "the inner metadata is readable")

	var back workflows.CallRequest
	require.NoError(t, dc.FromPayload(p, &back))
	require.Equal(t, sampleRequest(), back)

	// Two encodings of the same value differ (fresh nonce per payload).
	p2, err := dc.ToPayload(sampleRequest())
	require.NoError(t, err)
	require.NotEqual(t, p.Data, p2.Data)
}

func TestKeyRotation(t *testing.T) {
	old := mustCodec(t, k1)
	written, err := old.Encode([]*commonpb.Payload{{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`"` + prompt + `"`)}})
	require.NoError(t, err)

	rotated := mustCodec(t, k2, k1)
	require.Equal(t, "k2", rotated.ActiveKeyID())
	require.Equal(t, []string{"k2", "k1"}, rotated.KeyIDs())
	got, err := rotated.Decode(written)
	require.NoError(t, err, "a payload written with k1 must decode after k2 became active")
	require.Equal(t, `"`+prompt+`"`, string(got[0].Data))

	fresh, err := rotated.Encode(got)
	require.NoError(t, err)
	require.Equal(t, "k2", string(fresh[0].Metadata[codec.MetadataKeyID]), "the first key encrypts")

	// Once k1 is dropped, its payloads are refused with a message that
	// names the key ID and the variable.
	_, err = mustCodec(t, k2).Decode(written)
	require.ErrorIs(t, err, codec.ErrUnknownKey)
	require.Contains(t, err.Error(), `key ID "k1"`)
	require.Contains(t, err.Error(), codec.EnvKeys)
}

func TestTamperedPayloadsAreRejected(t *testing.T) {
	c := mustCodec(t, k2, k1)
	enc, err := c.Encode([]*commonpb.Payload{{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`"yes"`)}})
	require.NoError(t, err)

	cases := map[string]func(p *commonpb.Payload){
		"flipped ciphertext byte": func(p *commonpb.Payload) { p.Data[len(p.Data)-20] ^= 0x01 },
		"flipped nonce byte":      func(p *commonpb.Payload) { p.Data[0] ^= 0x80 },
		"truncated":               func(p *commonpb.Payload) { p.Data = p.Data[:10] },
		"key ID swapped":          func(p *commonpb.Payload) { p.Metadata[codec.MetadataKeyID] = []byte("k1") },
	}
	for name, tamper := range cases {
		t.Run(name, func(t *testing.T) {
			p := &commonpb.Payload{Metadata: map[string][]byte{}, Data: bytes.Clone(enc[0].Data)}
			for k, v := range enc[0].Metadata {
				p.Metadata[k] = bytes.Clone(v)
			}
			tamper(p)
			_, err := c.Decode([]*commonpb.Payload{p})
			require.ErrorIs(t, err, codec.ErrDecrypt)
		})
	}
	// The untouched payload still decodes.
	_, err = c.Decode(enc)
	require.NoError(t, err)
}

func TestUnknownAndMissingKeyID(t *testing.T) {
	c := mustCodec(t, k1)
	enc, err := mustCodec(t, codec.Key{ID: "retired-2024", Secret: secret(9)}).Encode([]*commonpb.Payload{{Data: []byte("x")}})
	require.NoError(t, err)
	_, err = c.Decode(enc)
	require.ErrorIs(t, err, codec.ErrUnknownKey)
	require.Contains(t, err.Error(), `"retired-2024"`)

	delete(enc[0].Metadata, codec.MetadataKeyID)
	_, err = c.Decode(enc)
	require.ErrorIs(t, err, codec.ErrUnknownKey)
	require.Contains(t, err.Error(), codec.MetadataKeyID)
}

func TestPlainPayloadsPassThrough(t *testing.T) {
	// Histories written before encryption was turned on still decode.
	plain, err := converter.GetDefaultDataConverter().ToPayload(sampleRequest())
	require.NoError(t, err)
	var back workflows.CallRequest
	require.NoError(t, mustCodec(t, k1).DataConverter().FromPayload(plain, &back))
	require.Equal(t, sampleRequest(), back)
}

func TestParseKeys(t *testing.T) {
	keys, err := codec.ParseKeys(codec.EnvKeys, " k2:"+b64(secret(2))+" , k1:"+base64.RawURLEncoding.EncodeToString(secret(1)))
	require.NoError(t, err)
	require.Equal(t, []codec.Key{k2, k1}, keys)
}

func TestBadKeysNameTheProblemNeverTheKey(t *testing.T) {
	short := b64(secret(7)[:16])
	good := b64(secret(3))
	// A URL-safe key without padding is made of the characters a key ID
	// may hold: written the wrong way round, it would pass for an ID.
	urlSafe := base64.RawURLEncoding.EncodeToString(bytes.Repeat([]byte{0xfb, 0xef, 0x3e}, 11)[:32])
	cases := []struct {
		name, value, want string
	}{
		{"wrong length", "k1:" + short, "entry 1: the key is 16 bytes, AES-256 needs 32"},
		{"bad base64", "k1:" + good[:20] + "!!" + good[22:], "entry 1: the key is not valid base64"},
		{"no key ID", good, "entry 1 has no key ID"},
		{"key and ID swapped", good + ":k1", "entry 1 is written the wrong way round"},
		{"URL-safe key and ID swapped", "k2:" + good + "," + urlSafe + ":k1", "entry 2 is written the wrong way round"},
		{"empty key", "k1:", "entry 1: the key is not valid base64"},
		{"empty entry", "k1:" + good + ",", "entry 2 is empty"},
		{"duplicate ID", "k1:" + good + ",k1:" + b64(secret(4)), "entries 1 and 2 have the same key ID"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := codec.FromEnv(func(k string) string {
				if k == codec.EnvKeys {
					return tc.value
				}
				return ""
			})
			require.Error(t, err)
			msg := err.Error()
			require.Contains(t, msg, tc.want)
			require.Contains(t, msg, codec.EnvKeys, "the message names the variable")
			for _, k := range []string{short, good, good[:20], good[22:], b64(secret(4)), urlSafe[:12], urlSafe[20:]} {
				require.NotContains(t, msg, k, "the message shows key material")
			}
		})
	}
}

func TestKeysNeverPrinted(t *testing.T) {
	k := codec.Key{ID: "k1", Secret: []byte("0123456789abcdef0123456789abcdef")}
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		out := fmt.Sprintf(format, k)
		require.NotContains(t, out, "0123456789", format)
		require.Contains(t, out, "k1", format)
	}
	out := fmt.Sprintf("%v", []codec.Key{k})
	require.NotContains(t, out, "0123456789")
}

func TestNewRejectsBadKeys(t *testing.T) {
	_, err := codec.New()
	require.Error(t, err)
	_, err = codec.New(codec.Key{ID: "k1", Secret: secret(1)[:31]})
	require.ErrorContains(t, err, "key 1 is 31 bytes")
	_, err = codec.New(codec.Key{ID: "bad id", Secret: secret(1)})
	require.ErrorContains(t, err, "key ID must be")
	_, err = codec.New(k1, k1)
	require.ErrorContains(t, err, "key 2: its ID is listed twice")
	swapped := base64.RawURLEncoding.EncodeToString(secret(9))
	_, err = codec.New(k1, codec.Key{ID: swapped, Secret: secret(2)})
	require.ErrorContains(t, err, "key 2: the key ID must be")
	require.NotContains(t, err.Error(), swapped[:10])
}

func env(vals map[string]string) func(string) string {
	return func(k string) string { return vals[k] }
}

func TestEncryptionOffWhenUnset(t *testing.T) {
	c, err := codec.FromEnv(env(nil))
	require.NoError(t, err)
	require.Nil(t, c)
	dc, err := codec.DataConverterFromEnv(env(nil))
	require.NoError(t, err)
	require.Nil(t, dc)

	var opts client.Options
	c, err = codec.ConfigureClient(&opts, env(nil))
	require.NoError(t, err)
	require.Nil(t, c)
	require.Nil(t, opts.DataConverter)
	require.Nil(t, opts.FailureConverter)
}

func TestConfigureClientAndReplayer(t *testing.T) {
	vals := env(map[string]string{codec.EnvKeys: "k2:" + b64(secret(2)) + ",k1:" + b64(secret(1))})
	var opts client.Options
	c, err := codec.ConfigureClient(&opts, vals)
	require.NoError(t, err)
	require.Equal(t, "k2", c.ActiveKeyID())
	p, err := opts.DataConverter.ToPayload(prompt)
	require.NoError(t, err)
	require.Equal(t, "k2", string(p.Metadata[codec.MetadataKeyID]))

	// Error messages are encoded too: an upstream error can quote the prompt.
	f := opts.FailureConverter.ErrorToFailure(temporal.NewApplicationError("upstream said: "+prompt, "server_error"))
	require.NotContains(t, f.GetMessage(), "4242")
	require.Equal(t, codec.EncodingEncrypted, string(f.GetEncodedAttributes().GetMetadata()[converter.MetadataEncoding]))
	back := opts.FailureConverter.FailureToError(f)
	require.Contains(t, back.Error(), prompt)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(back, &appErr))
	require.Equal(t, "server_error", appErr.Type(), "the failure class stays readable to the workflow")

	var ropts worker.WorkflowReplayerOptions
	_, err = codec.ConfigureReplayer(&ropts, vals)
	require.NoError(t, err)
	require.NotNil(t, ropts.DataConverter)
	require.NotNil(t, ropts.FailureConverter)
}

// BenchmarkRoundTrip measures converting one CallRequest to a payload and
// back, with the default data converter and with encryption, for a short
// and a long prompt: the difference is the codec's cost.
func BenchmarkRoundTrip(b *testing.B) {
	c, err := codec.New(k1)
	require.NoError(b, err)
	converters := []struct {
		name string
		dc   converter.DataConverter
	}{{"plain", converter.GetDefaultDataConverter()}, {"encrypted", c.DataConverter()}}
	for _, size := range []int{1 << 10, 64 << 10} {
		req := sampleRequest()
		req.Messages[0].Content = strings.Repeat("x", size)
		for _, conv := range converters {
			b.Run(fmt.Sprintf("%s/%dKiB", conv.name, size>>10), func(b *testing.B) {
				b.SetBytes(int64(size))
				for b.Loop() {
					p, err := conv.dc.ToPayload(req)
					if err != nil {
						b.Fatal(err)
					}
					var back workflows.CallRequest
					if err := conv.dc.FromPayload(p, &back); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
