package codec

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/proto"
)

const (
	// EnvKeys is the environment variable that holds the payload keys:
	// "<id>:<base64 key>[,<id>:<base64 key>…]", the first one encrypts.
	EnvKeys = "LLM_PAYLOAD_KEYS"
	// EncodingEncrypted is the metadata encoding of an encrypted payload.
	EncodingEncrypted = "binary/encrypted"
	// MetadataKeyID is the metadata entry that names the key a payload was
	// encrypted with.
	MetadataKeyID = "encryption-key-id"
	// KeySize is the size of an AES-256 key in bytes.
	KeySize = 32
)

var (
	// ErrUnknownKey is returned when a payload was encrypted with a key ID
	// that is not configured.
	ErrUnknownKey = errors.New("unknown encryption key ID")
	// ErrDecrypt is returned when a payload fails authentication: its bytes
	// or its metadata were altered, or the key under its ID changed.
	ErrDecrypt = errors.New("payload decryption failed")
)

// keyIDRE is what a key ID may be: it is written into every payload.
var keyIDRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// Key is one AES-256 key and the ID written into the payloads it encrypts.
// Its String and GoString never show the secret.
type Key struct {
	// ID names the key in payload metadata: letters, digits, '.', '_', '-'.
	ID string
	// Secret is the 32-byte AES-256 key.
	Secret []byte
}

// String implements fmt.Stringer without the secret.
func (k Key) String() string {
	return fmt.Sprintf("codec.Key{ID: %q, Secret: <%d bytes redacted>}", k.ID, len(k.Secret))
}

// GoString implements fmt.GoStringer without the secret.
func (k Key) GoString() string { return k.String() }

// Codec is an AES-256-GCM converter.PayloadCodec with key rotation. It is
// safe for concurrent use.
type Codec struct {
	active string
	ids    []string
	aeads  map[string]cipher.AEAD
	rand   io.Reader
	cutoff time.Time // the plaintext cut-off (WithPlaintextCutoff); zero: none
}

var _ converter.PayloadCodec = (*Codec)(nil)

// New returns a codec that encrypts with the first key and decrypts with
// any of them.
func New(keys ...Key) (*Codec, error) {
	if len(keys) == 0 {
		return nil, errors.New("codec: at least one key is required")
	}
	c := &Codec{active: keys[0].ID, aeads: make(map[string]cipher.AEAD, len(keys)), rand: rand.Reader}
	for i, k := range keys {
		// Keys are named by their position: an ID may be a misplaced key.
		n := i + 1
		if !keyIDRE.MatchString(k.ID) || looksLikeKey(k.ID) {
			return nil, fmt.Errorf("codec: key %d: the key ID must be 1-64 letters, digits, '.', '_' or '-', not a key", n)
		}
		if _, dup := c.aeads[k.ID]; dup {
			return nil, fmt.Errorf("codec: key %d: its ID is listed twice", n)
		}
		if len(k.Secret) != KeySize {
			return nil, fmt.Errorf("codec: key %d is %d bytes, AES-256 needs %d", n, len(k.Secret), KeySize)
		}
		block, err := aes.NewCipher(k.Secret)
		if err != nil {
			return nil, fmt.Errorf("codec: key %d: %w", n, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("codec: key %d: %w", n, err)
		}
		c.aeads[k.ID] = aead
		c.ids = append(c.ids, k.ID)
	}
	return c, nil
}

// ParseKeys parses "<id>:<base64 key>[,…]" as found in the environment
// variable name. Errors name the variable and the entry by its position,
// never any part of an entry: a key written where its ID goes (an entry
// the wrong way round) must not be printed as if it were an ID. Standard
// and URL-safe base64, padded or not, are accepted.
func ParseKeys(name, value string) ([]Key, error) {
	const hint = "expected <key id>:<base64 of 32 random bytes>[,…], e.g. k1:$(openssl rand -base64 32)"
	var keys []Key
	seen := map[string]int{}
	for i, entry := range strings.Split(value, ",") {
		entry = strings.TrimSpace(entry)
		n := i + 1
		if entry == "" {
			return nil, fmt.Errorf("%s: entry %d is empty (%s)", name, n, hint)
		}
		id, b64, ok := strings.Cut(entry, ":")
		id, b64 = strings.TrimSpace(id), strings.TrimSpace(b64)
		if !ok {
			return nil, fmt.Errorf("%s: entry %d has no key ID (%s)", name, n, hint)
		}
		if looksLikeKey(id) {
			return nil, fmt.Errorf("%s: entry %d is written the wrong way round: a key stands where its ID goes (%s)", name, n, hint)
		}
		if !keyIDRE.MatchString(id) {
			return nil, fmt.Errorf("%s: entry %d: the key ID must be 1-64 letters, digits, '.', '_' or '-' (%s)", name, n, hint)
		}
		if j, dup := seen[id]; dup {
			return nil, fmt.Errorf("%s: entries %d and %d have the same key ID", name, j, n)
		}
		seen[id] = n
		secret, ok := decodeBase64(b64)
		if !ok {
			return nil, fmt.Errorf("%s: entry %d: the key is not valid base64 (%s)", name, n, hint)
		}
		if len(secret) != KeySize {
			return nil, fmt.Errorf("%s: entry %d: the key is %d bytes, AES-256 needs %d (%s)", name, n, len(secret), KeySize, hint)
		}
		keys = append(keys, Key{ID: id, Secret: secret})
	}
	return keys, nil
}

// looksLikeKey reports whether s, found where a key ID goes, is a key:
// base64 of KeySize bytes.
func looksLikeKey(s string) bool {
	b, ok := decodeBase64(s)
	return ok && len(b) == KeySize
}

func decodeBase64(s string) ([]byte, bool) {
	if s == "" {
		return nil, false
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, true
		}
	}
	return nil, false
}

// FromEnv builds the codec from LLM_PAYLOAD_KEYS, read with getenv
// (usually os.Getenv), with the plaintext cut-off of
// LLM_PAYLOAD_PLAINTEXT_CUTOFF when set. It returns nil, nil when
// LLM_PAYLOAD_KEYS is empty: encryption is off.
func FromEnv(getenv func(string) string) (*Codec, error) {
	v := strings.TrimSpace(getenv(EnvKeys))
	cutoff, err := ParseCutoff(getenv(EnvPlaintextCutoff))
	if err != nil {
		return nil, err
	}
	if v == "" {
		if !cutoff.IsZero() {
			return nil, fmt.Errorf("%s is set but %s is not: a plaintext cut-off needs payload encryption", EnvPlaintextCutoff, EnvKeys)
		}
		return nil, nil
	}
	keys, err := ParseKeys(EnvKeys, v)
	if err != nil {
		return nil, err
	}
	c, err := New(keys...)
	if err != nil {
		return nil, err
	}
	return c.WithPlaintextCutoff(cutoff), nil
}

// ActiveKeyID is the ID of the key that encrypts.
func (c *Codec) ActiveKeyID() string { return c.active }

// KeyIDs are the IDs of every key that decrypts, the active one first.
func (c *Codec) KeyIDs() []string { return append([]string(nil), c.ids...) }

// Encode implements converter.PayloadCodec: each payload (metadata and
// data) is encrypted with the active key into a binary/encrypted payload
// whose metadata names the key.
func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	aead := c.aeads[c.active]
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		plain, err := proto.Marshal(p)
		if err != nil {
			return payloads, fmt.Errorf("codec: marshal payload: %w", err)
		}
		nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
		if _, err := io.ReadFull(c.rand, nonce); err != nil {
			return payloads, fmt.Errorf("codec: nonce: %w", err)
		}
		out[i] = &commonpb.Payload{
			Metadata: map[string][]byte{
				converter.MetadataEncoding: []byte(EncodingEncrypted),
				MetadataKeyID:              []byte(c.active),
			},
			Data: aead.Seal(nonce, nonce, plain, []byte(c.active)),
		}
	}
	return out, nil
}

// Decode implements converter.PayloadCodec: encrypted payloads are
// decrypted with the key their metadata names; other payloads pass
// unchanged (they were written before encryption was on).
func (c *Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if string(p.GetMetadata()[converter.MetadataEncoding]) != EncodingEncrypted {
			out[i] = p
			continue
		}
		id := string(p.GetMetadata()[MetadataKeyID])
		aead, ok := c.aeads[id]
		if !ok {
			if id == "" {
				return payloads, fmt.Errorf("%w: an encrypted payload has no %s metadata", ErrUnknownKey, MetadataKeyID)
			}
			return payloads, fmt.Errorf("%w: a payload was encrypted with key ID %q, %s has %s (keep old keys listed after the active one while their histories are read)",
				ErrUnknownKey, id, EnvKeys, strings.Join(c.ids, ", "))
		}
		data := p.GetData()
		if len(data) < aead.NonceSize()+aead.Overhead() {
			return payloads, fmt.Errorf("%w (key ID %q): ciphertext is too short", ErrDecrypt, id)
		}
		plain, err := aead.Open(nil, data[:aead.NonceSize()], data[aead.NonceSize():], []byte(id))
		if err != nil {
			return payloads, fmt.Errorf("%w (key ID %q): the payload or its metadata was altered, or the key under this ID is not the one that encrypted it", ErrDecrypt, id)
		}
		var dec commonpb.Payload
		if err := proto.Unmarshal(plain, &dec); err != nil {
			return payloads, fmt.Errorf("%w (key ID %q): decrypted bytes are not a payload: %v", ErrDecrypt, id, err)
		}
		out[i] = &dec
	}
	return out, nil
}

// DataConverter is the SDK's default data converter with this codec; in a
// worker, it applies the plaintext cut-off (WithPlaintextCutoff) to the
// payloads each workflow reads.
func (c *Codec) DataConverter() converter.DataConverter {
	return &dataConverter{DataConverter: converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), c), c: c}
}

// FailureConverter encodes error messages and stack traces through the
// codec; without it Temporal stores them in plain text, and an upstream's
// error message can quote the prompt.
func (c *Codec) FailureConverter() converter.FailureConverter {
	return temporal.NewDefaultFailureConverter(temporal.DefaultFailureConverterOptions{
		DataConverter:          c.DataConverter(),
		EncodeCommonAttributes: true,
	})
}

// DataConverterFromEnv is the data converter for LLM_PAYLOAD_KEYS read
// with getenv, or nil, nil when encryption is off.
func DataConverterFromEnv(getenv func(string) string) (converter.DataConverter, error) {
	c, err := FromEnv(getenv)
	if c == nil || err != nil {
		return nil, err
	}
	return c.DataConverter(), nil
}

// ConfigureClient sets the data and failure converters of opts when
// LLM_PAYLOAD_KEYS (read with getenv) holds keys, and returns the codec;
// it leaves opts alone and returns nil, nil when encryption is off.
func ConfigureClient(opts *client.Options, getenv func(string) string) (*Codec, error) {
	c, err := FromEnv(getenv)
	if c == nil || err != nil {
		return nil, err
	}
	opts.DataConverter = c.DataConverter()
	opts.FailureConverter = c.FailureConverter()
	return c, nil
}

// ConfigureReplayer is ConfigureClient for a workflow replayer: histories
// recorded with encryption on replay only with the keys that wrote them.
func ConfigureReplayer(opts *worker.WorkflowReplayerOptions, getenv func(string) string) (*Codec, error) {
	c, err := FromEnv(getenv)
	if c == nil || err != nil {
		return nil, err
	}
	opts.DataConverter = c.DataConverter()
	opts.FailureConverter = c.FailureConverter()
	return c, nil
}
