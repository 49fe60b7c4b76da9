package prompt

import (
	"flag"
	"math"
	"os"
	"strings"
	"testing"
	"unicode/utf8"
)

var updateEstimateTables = flag.Bool("update-estimate-tables", false, "regenerate estimate_cl100k.bin from the tokenizer")

// estRareBelow: a letter pair is rare when fewer than this many
// cl100k_base tokens made of lower-case letters contain it.
const estRareBelow = 120

// buildEstimateTables computes estimateTables from cl100k_base (the
// repeat rates from the larger of cl100k_base and o200k_base).
func buildEstimateTables(t testing.TB) []byte {
	tc := mustCounter(t, "cl100k_base")
	out := make([]byte, estTablesLen)
	var weight [26][26]int
	for id := uint(0); id < 100_256; id++ {
		s, err := tc.codec.Decode([]uint{id})
		if err != nil {
			continue
		}
		s = strings.TrimPrefix(s, " ")
		if len(s) < 2 || strings.Trim(s, "abcdefghijklmnopqrstuvwxyz") != "" {
			continue
		}
		for i := 1; i < len(s); i++ {
			weight[s[i-1]-'a'][s[i]-'a']++
		}
	}
	for a := range 26 {
		for b := range 26 {
			if weight[a][b] < estRareBelow {
				i := a*26 + b
				out[i>>3] |= 1 << (i & 7)
			}
		}
	}
	for r := rune(estRuneFirst); r <= estRuneLast; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		c := min(tc.Count(string(r)), 3)
		i := int(r - estRuneFirst)
		out[estBigramBytes+i>>2] |= byte(c) << ((i & 3) * 2)
	}
	o200k := mustCounter(t, "o200k_base")
	for c := range 128 {
		rate := 0.0
		for _, n := range []int{8, 12, 16, 24, 32, 48, 64, 100, 128, 200, 256, 512, 1000} {
			s := strings.Repeat(string(rune(c)), n)
			rate = max(rate, float64(max(tc.Count(s), o200k.Count(s))-1)/float64(n))
		}
		out[estRepeatAt+c] = byte(min(255, max(1, int(math.Ceil(rate*256)))))
	}
	return out
}

// The embedded tables must be what cl100k_base says.
func TestEstimateTables(t *testing.T) {
	want := buildEstimateTables(t)
	if *updateEstimateTables {
		if err := os.WriteFile("estimate_cl100k.bin", want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if estimateTables != string(want) {
		t.Fatal("estimate_cl100k.bin is stale: go test ./policies/prompt -run TestEstimateTables -update-estimate-tables")
	}
}
