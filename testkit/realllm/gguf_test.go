package realllm_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"testing"

	"github.com/durable-llm/durable-llm/testkit/realllm"
)

// ggufFile is what readGGUF reads back: the key-value pairs and, per
// tensor, its dimensions and data.
type ggufFile struct {
	kv      map[string]any
	dims    map[string][]uint64
	data    map[string][]float32
	size    int
	dataOff int
}

// readGGUF parses a GGUF v3 file as ggml's docs/gguf.md defines it,
// refusing anything the writer should not produce (other versions,
// unaligned or overlapping tensors, bytes left over).
func readGGUF(b []byte) (*ggufFile, error) {
	r := bytes.NewReader(b)
	le := binary.LittleEndian
	var hdr struct {
		Magic   [4]byte
		Version uint32
		Tensors uint64
		KVs     uint64
	}
	if err := binary.Read(r, le, &hdr); err != nil {
		return nil, err
	}
	if string(hdr.Magic[:]) != "GGUF" || hdr.Version != 3 {
		return nil, fmt.Errorf("magic %q version %d", hdr.Magic, hdr.Version)
	}
	str := func() (string, error) {
		var n uint64
		if err := binary.Read(r, le, &n); err != nil {
			return "", err
		}
		if n > uint64(r.Len()) {
			return "", fmt.Errorf("string of %d bytes", n)
		}
		s := make([]byte, n)
		_, err := io.ReadFull(r, s)
		return string(s), err
	}
	var scalar func(typ uint32) (any, error)
	scalar = func(typ uint32) (any, error) {
		switch typ {
		case 4:
			var v uint32
			return v, binary.Read(r, le, &v)
		case 5:
			var v int32
			return v, binary.Read(r, le, &v)
		case 6:
			var v float32
			return v, binary.Read(r, le, &v)
		case 7:
			var v uint8
			err := binary.Read(r, le, &v)
			if v > 1 {
				return nil, fmt.Errorf("bool %d", v)
			}
			return v == 1, err
		case 8:
			return str()
		case 9:
			var et uint32
			var n uint64
			if err := binary.Read(r, le, &et); err != nil {
				return nil, err
			}
			if err := binary.Read(r, le, &n); err != nil {
				return nil, err
			}
			out := make([]any, 0, n)
			for range n {
				v, err := scalar(et)
				if err != nil {
					return nil, err
				}
				out = append(out, v)
			}
			return out, nil
		}
		return nil, fmt.Errorf("value type %d", typ)
	}
	f := &ggufFile{kv: map[string]any{}, dims: map[string][]uint64{}, data: map[string][]float32{}, size: len(b)}
	for range hdr.KVs {
		k, err := str()
		if err != nil {
			return nil, err
		}
		var typ uint32
		if err := binary.Read(r, le, &typ); err != nil {
			return nil, err
		}
		if f.kv[k], err = scalar(typ); err != nil {
			return nil, fmt.Errorf("key %s: %w", k, err)
		}
	}
	align := uint64(f.kv["general.alignment"].(uint32))
	type info struct {
		name   string
		n, off uint64
	}
	var infos []info
	for range hdr.Tensors {
		name, err := str()
		if err != nil {
			return nil, err
		}
		var nd uint32
		if err := binary.Read(r, le, &nd); err != nil {
			return nil, err
		}
		dims := make([]uint64, nd)
		if err := binary.Read(r, le, dims); err != nil {
			return nil, err
		}
		var typ uint32
		var off uint64
		if err := binary.Read(r, le, &typ); err != nil {
			return nil, err
		}
		if err := binary.Read(r, le, &off); err != nil {
			return nil, err
		}
		if typ != 0 || off%align != 0 {
			return nil, fmt.Errorf("tensor %s: type %d at offset %d", name, typ, off)
		}
		n := uint64(1)
		for _, d := range dims {
			n *= d
		}
		f.dims[name] = dims
		infos = append(infos, info{name, n, off})
	}
	pos := uint64(len(b) - r.Len())
	f.dataOff = int((pos + align - 1) / align * align)
	end := uint64(0)
	for _, in := range infos {
		if in.off < end {
			return nil, fmt.Errorf("tensor %s overlaps the one before", in.name)
		}
		start := uint64(f.dataOff) + in.off
		if start+4*in.n > uint64(len(b)) {
			return nil, fmt.Errorf("tensor %s runs past the end", in.name)
		}
		vals := make([]float32, in.n)
		for i := range vals {
			vals[i] = math.Float32frombits(le.Uint32(b[start+4*uint64(i):]))
		}
		f.data[in.name] = vals
		end = in.off + (4*in.n+align-1)/align*align
	}
	if uint64(f.dataOff)+end != uint64(len(b)) {
		return nil, fmt.Errorf("%d bytes after the last tensor", uint64(len(b))-uint64(f.dataOff)-end)
	}
	return f, nil
}

func write(t *testing.T, o realllm.ModelOptions) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := realllm.WriteModel(&buf, o); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestWriteModel: the file is a well-formed GGUF v3 llama model whose
// shapes agree with its hyperparameters and its vocabulary, written the
// same way every time.
func TestWriteModel(t *testing.T) {
	b := write(t, realllm.ModelOptions{})
	f, err := readGGUF(b)
	if err != nil {
		t.Fatalf("not a GGUF file: %v", err)
	}
	for k, want := range map[string]any{
		"general.architecture":                   "llama",
		"llama.context_length":                   uint32(2048),
		"llama.embedding_length":                 uint32(64),
		"llama.block_count":                      uint32(2),
		"llama.feed_forward_length":              uint32(128),
		"llama.attention.head_count":             uint32(4),
		"llama.attention.head_count_kv":          uint32(4),
		"llama.rope.dimension_count":             uint32(16),
		"llama.vocab_size":                       uint32(354),
		"tokenizer.ggml.model":                   "llama",
		"tokenizer.ggml.bos_token_id":            uint32(1),
		"tokenizer.ggml.eos_token_id":            uint32(2),
		"tokenizer.ggml.add_bos_token":           true,
		"llama.attention.layer_norm_rms_epsilon": float32(1e-5),
		"general.file_type":                      uint32(0),
	} {
		if got := f.kv[k]; got != want {
			t.Errorf("%s = %v (%T), want %v", k, got, got, want)
		}
	}
	toks := f.kv["tokenizer.ggml.tokens"].([]any)
	if len(toks) != 354 || len(f.kv["tokenizer.ggml.scores"].([]any)) != 354 || len(f.kv["tokenizer.ggml.token_type"].([]any)) != 354 {
		t.Fatalf("vocabulary arrays of %d tokens disagree", len(toks))
	}
	for i, want := range map[int]string{0: "<unk>", 1: "<s>", 2: "</s>", 3: "<0x00>", 258: "<0xFF>", 259: "\u2581", 260: "!", 353: "~"} {
		if toks[i] != want {
			t.Errorf("token %d = %q, want %q", i, toks[i], want)
		}
	}
	if len(f.dims) != 3+2*9 {
		t.Errorf("%d tensors, want %d", len(f.dims), 3+2*9)
	}
	for name, want := range map[string][]uint64{
		"token_embd.weight":     {64, 354},
		"output.weight":         {64, 354},
		"output_norm.weight":    {64},
		"blk.1.attn_k.weight":   {64, 64},
		"blk.1.ffn_gate.weight": {64, 128},
		"blk.1.ffn_down.weight": {128, 64},
	} {
		if got := f.dims[name]; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s has dimensions %v, want %v", name, got, want)
		}
	}
	if f.size < 500_000 || f.size > 560_000 {
		t.Errorf("the file has %d bytes, want about 520 KB", f.size)
	}
	if again := write(t, realllm.ModelOptions{}); !bytes.Equal(again, b) {
		t.Error("the same options wrote different files")
	}
	if other := write(t, realllm.ModelOptions{Seed: 7}); bytes.Equal(other, b) {
		t.Error("another seed wrote the same file")
	}
}

// TestWriteModelShapesTheOutput: residual dimensions 0 and 1 come from
// the embedding alone (no layer writes to them), and the output layer
// reads them: dimension 0 as a bias that keeps control and byte tokens
// out, dimension 1 (printable character or not) for </s>, which with
// EOSLogit can follow a printable character only.
func TestWriteModelShapesTheOutput(t *testing.T) {
	plain, err := readGGUF(write(t, realllm.ModelOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	eos, err := readGGUF(write(t, realllm.ModelOptions{EOSLogit: 4}))
	if err != nil {
		t.Fatal(err)
	}
	const e, space = 64, 259
	emb := plain.data["token_embd.weight"]
	for tok := 0; tok < 354; tok++ {
		want1 := float32(-8)
		if tok > space {
			want1 = 8
		}
		if emb[tok*e] != 8 || emb[tok*e+1] != want1 {
			t.Fatalf("token %d has residual dimensions 0, 1 = %v, %v, want 8, %v", tok, emb[tok*e], emb[tok*e+1], want1)
		}
	}
	for _, name := range []string{"blk.0.attn_output.weight", "blk.1.ffn_down.weight"} {
		w := plain.data[name]
		in := len(w) / e
		for j := 0; j < 2*in; j++ {
			if w[j] != 0 {
				t.Fatalf("%s writes to residual dimension %d", name, j/in)
			}
		}
	}
	out, outEOS := plain.data["output.weight"], eos.data["output.weight"]
	for tok := 0; tok < space; tok++ {
		if out[tok*e] != -10 || out[tok*e+1] != 0 {
			t.Errorf("token %d has bias weights %v, %v, want -10, 0", tok, out[tok*e], out[tok*e+1])
		}
	}
	for tok := space; tok < 354; tok++ {
		if out[tok*e] != 0 || out[tok*e+1] != 0 {
			t.Errorf("printable token %d has bias weights %v, %v, want 0, 0", tok, out[tok*e], out[tok*e+1])
		}
	}
	// </s>'s logit is about w0·h + w1·h after a printable character and
	// w0·h - w1·h after anything else (h: the size of the two dimensions
	// after the RMS norm, with the other 62 of variance 1).
	w0, w1 := float64(outEOS[2*e]), float64(outEOS[2*e+1])
	h := 8 / math.Sqrt((2*64+62)/64.0)
	if after, other := (w0+w1)*h, (w0-w1)*h; math.Abs(after-4) > 0.5 || other > -15 {
		t.Errorf("</s> gets a logit of %.1f after a printable character (want about 4) and %.1f after another token (want about -20)", after, other)
	}
	if sum := sha256.Sum256(write(t, realllm.ModelOptions{})); sum == sha256.Sum256(write(t, realllm.ModelOptions{EOSLogit: 4})) {
		t.Error("EOSLogit changed nothing")
	}
}
