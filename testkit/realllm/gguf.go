package realllm

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
)

// ModelOptions shape the tiny model WriteModel writes. The zero value is
// the model `tiny` of the tests: 2 layers, 64 wide, 4 heads, a 2,048-token
// context, a fixed seed, and an end-of-sequence token it never emits.
type ModelOptions struct {
	// EOSLogit, when positive, gives </s> a logit of about that value
	// after every printable character, so the model ends its answers by
	// itself (4: a median of about 60 tokens, from a few to several
	// hundred); 0: it never does, and stops only at a token limit.
	EOSLogit float64
	// Seed of the weights (default 42).
	Seed uint64
	// Context is the context length in tokens (default 2048).
	Context int
	// Embedding, Layers, Heads and FFN size the network (defaults 64, 2,
	// 4, 128); Embedding must be a multiple of Heads.
	Embedding, Layers, Heads, FFN int
}

func (o ModelOptions) withDefaults() ModelOptions {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.Context, 2048)
	def(&o.Embedding, 64)
	def(&o.Layers, 2)
	def(&o.Heads, 4)
	def(&o.FFN, 128)
	if o.Seed == 0 {
		o.Seed = 42
	}
	return o
}

// The vocabulary, sentencepiece style (tokenizer "llama"): <unk>, <s>,
// </s>, the 256 byte tokens, then "▁" (the space) and printable ASCII.
const (
	tokUnknown       = 0
	tokBOS           = 1
	tokEOS           = 2
	firstPrintable   = 3 + 256
	residualConstant = 8.0 // the size of residual dimensions 0 and 1 (see WriteModel)
)

// Token types of the GGUF tokenizer.
const (
	typeNormal  = 1
	typeUnknown = 2
	typeControl = 3
	typeByte    = 6
)

type vocab struct {
	tokens []string
	scores []float32
	types  []int32
}

func tinyVocab() vocab {
	var v vocab
	add := func(tok string, score float32, typ int32) {
		v.tokens, v.scores, v.types = append(v.tokens, tok), append(v.scores, score), append(v.types, typ)
	}
	add("<unk>", 0, typeUnknown)
	add("<s>", 0, typeControl)
	add("</s>", 0, typeControl)
	for b := 0; b < 256; b++ {
		add(fmt.Sprintf("<0x%02X>", b), 0, typeByte)
	}
	add("\u2581", -1, typeNormal)
	for c := 0x21; c < 0x7f; c++ {
		add(string(rune(c)), -1-float32(c-0x20)*0.001, typeNormal)
	}
	return v
}

// WriteModelFile writes the model of o to path (see WriteModel).
func WriteModelFile(path string, o ModelOptions) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := WriteModel(f, o); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// WriteModel writes a tiny llama-architecture model with random weights
// as a GGUF v3 file (all tensors F32; about 520 KB with the defaults),
// the same bytes for the same options. Nothing is downloaded: the
// weights come from the seed. What it generates is gibberish of
// printable ASCII, through a real tokenizer and a real forward pass.
//
// Two residual dimensions are set by the embedding alone (no attention
// or feed-forward output writes to them), and the output layer reads
// them. Dimension 0 is the same constant for every token: a bias, so
// that control and byte tokens never win. Dimension 1 is +constant for a
// printable character and -constant for any other token (the prompt's
// last, a newline, is a byte token), so that </s> can follow only a
// printable character: with EOSLogit it has a logit of about EOSLogit
// there and far below zero elsewhere, and an answer is never empty.
func WriteModel(w io.Writer, o ModelOptions) error {
	o = o.withDefaults()
	if o.Embedding%o.Heads != 0 || o.Embedding < 3 {
		return fmt.Errorf("embedding %d is not a multiple of %d heads", o.Embedding, o.Heads)
	}
	v := tinyVocab()
	nVocab := len(v.tokens)
	rng := rand.New(rand.NewPCG(o.Seed, 0x6767756620763320)) // "gguf v3 "
	randn := func(n int, std float64) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = float32(rng.NormFloat64() * std)
		}
		return out
	}
	// matrix is the weight of y = W·x with in inputs and out outputs:
	// ne = [in, out], row r (output r) at r*in; rows zeroRows are 0.
	matrix := func(out, in int, std float64, zeroRows ...int) []float32 {
		m := randn(out*in, std)
		for _, r := range zeroRows {
			clear(m[r*in : (r+1)*in])
		}
		return m
	}
	ones := func(n int) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = 1
		}
		return out
	}
	e := o.Embedding
	headDim := e / o.Heads

	var ts []tensor
	emb := randn(nVocab*e, 1)
	for t := 0; t < nVocab; t++ {
		emb[t*e] = residualConstant
		emb[t*e+1] = -residualConstant
		if t > firstPrintable { // not the space
			emb[t*e+1] = residualConstant
		}
	}
	ts = append(ts, tensor{"token_embd.weight", []uint64{uint64(e), uint64(nVocab)}, emb})
	ts = append(ts, tensor{"output_norm.weight", []uint64{uint64(e)}, ones(e)})
	// After the RMS norm, dimensions 0 and 1 are about ±h: logit_t ≈
	// W[t][0]·h ± W[t][1]·h, plus the random rest for printable tokens.
	h := residualConstant / math.Sqrt((2*residualConstant*residualConstant+float64(e-2))/float64(e))
	const eosElsewhere = -20.0 // </s>'s logit after a token that is not printable
	out := make([]float32, 0, nVocab*e)
	for t := 0; t < nVocab; t++ {
		row := make([]float32, e)
		switch {
		case t >= firstPrintable:
			copy(row[2:], randn(e-2, 0.5))
		case t == tokEOS && o.EOSLogit > 0:
			row[0] = float32((o.EOSLogit + eosElsewhere) / (2 * h))
			row[1] = float32((o.EOSLogit - eosElsewhere) / (2 * h))
		default:
			row[0] = -10
		}
		out = append(out, row...)
	}
	ts = append(ts, tensor{"output.weight", []uint64{uint64(e), uint64(nVocab)}, out})
	in := 1 / math.Sqrt(float64(e))
	for i := 0; i < o.Layers; i++ {
		b := fmt.Sprintf("blk.%d.", i)
		ts = append(ts,
			tensor{b + "attn_norm.weight", []uint64{uint64(e)}, ones(e)},
			tensor{b + "attn_q.weight", []uint64{uint64(e), uint64(e)}, matrix(e, e, in)},
			tensor{b + "attn_k.weight", []uint64{uint64(e), uint64(e)}, matrix(e, e, in)},
			tensor{b + "attn_v.weight", []uint64{uint64(e), uint64(e)}, matrix(e, e, in)},
			tensor{b + "attn_output.weight", []uint64{uint64(e), uint64(e)}, matrix(e, e, in, 0, 1)},
			tensor{b + "ffn_norm.weight", []uint64{uint64(e)}, ones(e)},
			tensor{b + "ffn_gate.weight", []uint64{uint64(e), uint64(o.FFN)}, matrix(o.FFN, e, in)},
			tensor{b + "ffn_up.weight", []uint64{uint64(e), uint64(o.FFN)}, matrix(o.FFN, e, in)},
			tensor{b + "ffn_down.weight", []uint64{uint64(o.FFN), uint64(e)}, matrix(e, o.FFN, 1/math.Sqrt(float64(o.FFN)), 0, 1)},
		)
	}

	const arch = "llama"
	kvs := []kv{
		{"general.architecture", arch},
		{"general.name", "durable-llm-tiny-random-llama"},
		{"general.file_type", uint32(0)}, // all F32
		{"general.alignment", uint32(ggufAlign)},
		{arch + ".context_length", uint32(o.Context)},
		{arch + ".embedding_length", uint32(e)},
		{arch + ".block_count", uint32(o.Layers)},
		{arch + ".feed_forward_length", uint32(o.FFN)},
		{arch + ".attention.head_count", uint32(o.Heads)},
		{arch + ".attention.head_count_kv", uint32(o.Heads)},
		{arch + ".rope.dimension_count", uint32(headDim)},
		{arch + ".rope.freq_base", float32(10000)},
		{arch + ".attention.layer_norm_rms_epsilon", float32(1e-5)},
		{arch + ".vocab_size", uint32(nVocab)},
		{"tokenizer.ggml.model", "llama"},
		{"tokenizer.ggml.tokens", v.tokens},
		{"tokenizer.ggml.scores", v.scores},
		{"tokenizer.ggml.token_type", v.types},
		{"tokenizer.ggml.unknown_token_id", uint32(tokUnknown)},
		{"tokenizer.ggml.bos_token_id", uint32(tokBOS)},
		{"tokenizer.ggml.eos_token_id", uint32(tokEOS)},
		{"tokenizer.ggml.add_bos_token", true},
		{"tokenizer.ggml.add_eos_token", false},
	}
	return writeGGUF(w, kvs, ts)
}

// GGUF v3 (ggml's docs/gguf.md): the magic, version, tensor and key
// counts, the key-value pairs, the tensor infos, then the tensor data,
// each aligned to general.alignment. Little-endian throughout.
const (
	ggufAlign   = 32
	ggufUint32  = 4
	ggufInt32   = 5
	ggufFloat32 = 6
	ggufBool    = 7
	ggufString  = 8
	ggufArray   = 9
	ggmlF32     = 0
)

type kv struct {
	key   string
	value any // uint32, float32, bool, string, []string, []float32, []int32
}

type tensor struct {
	name string
	ne   []uint64 // dimensions, fastest first
	data []float32
}

func writeGGUF(w io.Writer, kvs []kv, ts []tensor) error {
	bw := &ggufWriter{w: bufio.NewWriter(w)}
	bw.raw([]byte("GGUF"))
	bw.put(uint32(3), uint64(len(ts)), uint64(len(kvs)))
	for _, p := range kvs {
		bw.str(p.key)
		switch v := p.value.(type) {
		case uint32:
			bw.put(uint32(ggufUint32), v)
		case float32:
			bw.put(uint32(ggufFloat32), v)
		case bool:
			bw.put(uint32(ggufBool), v)
		case string:
			bw.put(uint32(ggufString))
			bw.str(v)
		case []string:
			bw.put(uint32(ggufArray), uint32(ggufString), uint64(len(v)))
			for _, s := range v {
				bw.str(s)
			}
		case []float32:
			bw.put(uint32(ggufArray), uint32(ggufFloat32), uint64(len(v)), v)
		case []int32:
			bw.put(uint32(ggufArray), uint32(ggufInt32), uint64(len(v)), v)
		default:
			return fmt.Errorf("gguf key %s: unsupported type %T", p.key, p.value)
		}
	}
	var offset uint64
	for _, t := range ts {
		n := uint64(1)
		for _, d := range t.ne {
			n *= d
		}
		if n != uint64(len(t.data)) {
			return fmt.Errorf("tensor %s: %d values for dimensions %v", t.name, len(t.data), t.ne)
		}
		bw.str(t.name)
		bw.put(uint32(len(t.ne)), t.ne, uint32(ggmlF32), offset)
		offset += padded(4 * n)
	}
	bw.pad()
	for _, t := range ts {
		bw.put(t.data)
		bw.pad()
	}
	if bw.err != nil {
		return bw.err
	}
	return bw.w.Flush()
}

func padded(n uint64) uint64 { return (n + ggufAlign - 1) / ggufAlign * ggufAlign }

// ggufWriter counts what it writes (for the alignment) and keeps the
// first error.
type ggufWriter struct {
	w   *bufio.Writer
	n   uint64
	err error
}

func (g *ggufWriter) raw(b []byte) {
	if g.err == nil {
		_, g.err = g.w.Write(b)
		g.n += uint64(len(b))
	}
}

func (g *ggufWriter) put(vs ...any) {
	for _, v := range vs {
		if g.err != nil {
			return
		}
		g.err = binary.Write(g.w, binary.LittleEndian, v)
		g.n += uint64(binary.Size(v))
	}
}

func (g *ggufWriter) str(s string) {
	g.put(uint64(len(s)))
	g.raw([]byte(s))
}

func (g *ggufWriter) pad() { g.raw(make([]byte, padded(g.n)-g.n)) }
