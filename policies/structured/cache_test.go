package structured

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// big is a distinct schema of about 100 KB with n properties.
func big(id, n int) json.RawMessage {
	return json.RawMessage(properties(n, func(i int) string {
		return fmt.Sprintf(`"s%d_p%d":{"type":"string","description":"field %d of record kind %d"}`, id, i, i, id)
	}))
}

// TestCacheStaysWithinItsBytes: after many large schemas the cache holds
// no more than its bound, keeps the most recently used ones, and drops
// the least recently used.
func TestCacheStaysWithinItsBytes(t *testing.T) {
	const bound = 16 << 20
	c := NewCacheBytes(bound)
	first := big(0, 1500)
	s0, err := c.Schema(first)
	if err != nil {
		t.Fatal(err)
	}
	if s0.cost < int64(len(first)) || s0.cost > bound/2 {
		t.Fatalf("a %d-byte schema costs %d, want between its size and half the bound", len(first), s0.cost)
	}
	for i := 1; i <= 40; i++ {
		if _, err := c.Schema(big(i, 1500)); err != nil {
			t.Fatal(err)
		}
		if again, _ := c.Schema(first); again != s0 { // first stays the most recently used
			t.Fatalf("after %d schemas the first, used every time, was compiled again", i)
		}
		if got := c.Bytes(); got > bound {
			t.Fatalf("after %d schemas the cache holds %d bytes, over its bound of %d", i+1, got, bound)
		}
	}
	if n := c.Len(); n >= 41 || n < 2 {
		t.Errorf("the cache keeps %d of 41 schemas, want some but not all", n)
	}
	if s1, _ := c.Schema(big(1, 1500)); s1 == nil || c.Len() > 41 {
		t.Errorf("an evicted schema does not compile again")
	}
	if c.Bytes() > bound {
		t.Errorf("the cache holds %d bytes, over its bound of %d", c.Bytes(), bound)
	}

	// A schema larger than the whole bound is compiled, not kept.
	small := NewCacheBytes(1 << 10)
	if s, err := small.Schema(first); err != nil || s == nil || small.Len() != 0 || small.Bytes() != 0 {
		t.Errorf("a schema over the bound: %v, %d kept, %d bytes", err, small.Len(), small.Bytes())
	}
}

// TestCacheKeepsRefusals: a refused schema is refused again from the
// cache, and concurrent callers of one new schema share its compilation.
func TestCacheKeepsRefusals(t *testing.T) {
	c := NewCache()
	raw := json.RawMessage(doubling(40))
	_, err1 := c.Schema(raw)
	_, err2 := c.Schema(raw)
	if err1 == nil || err1 != err2 || c.Len() != 1 {
		t.Errorf("refusals %v and %v, %d kept; want the same error, kept once", err1, err2, c.Len())
	}
	var wg sync.WaitGroup
	got := make([]*Schema, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], _ = c.Schema(big(99, 200))
		}()
	}
	wg.Wait()
	for _, s := range got {
		if s == nil || s != got[0] {
			t.Fatalf("concurrent callers got %p and %p, want one compiled schema", s, got[0])
		}
	}
}

// BenchmarkRefuse120kProperties: the front door refuses the 1.9 MB
// schema of issue 30 (138 s to compile before) without decoding it.
func BenchmarkRefuse120kProperties(b *testing.B) {
	raw := json.RawMessage(properties(120000, func(i int) string { return fmt.Sprintf(`"p%d":{"type":"string"}`, i) }))
	for b.Loop() {
		if _, err := Compile(raw); err == nil {
			b.Fatal("compiled")
		}
	}
}

// BenchmarkRefuseOverLimits: the schemas refused after decoding (the
// most properties that fit in MaxSchemaBytes; the 40-level doubling).
func BenchmarkRefuseOverLimits(b *testing.B) {
	for name, raw := range map[string]string{
		"50k properties":    properties(50000, func(i int) string { return fmt.Sprintf(`"%d":true`, i) }),
		"doubling 40":       doubling(40),
		"10k subschemas+1":  `{"anyOf":[` + repeat(10000, "true") + `]}`,
		"5001 properties":   properties(5001, func(i int) string { return fmt.Sprintf(`"%d":true`, i) }),
		"1001 enum values":  `{"enum":[` + repeat(1001, `"x"`) + `]}`,
		"deep over 64":      strings.Repeat(`{"items":`, 64) + `{}` + strings.Repeat(`}`, 64),
		"a chain of $refs":  `{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"a":{"$ref":"#/definitions/b"},"b":{"$ref":"#/definitions/a"}},"$ref":"#/definitions/a"}`,
		"dynamic reference": `{"items":{"$dynamicRef":"#n"}}`,
	} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				if _, err := Compile(json.RawMessage(raw)); err == nil {
					b.Fatal("compiled")
				}
			}
		})
	}
}

// BenchmarkCompile compiles schemas at and below the limits, reporting
// what the heap holds of one (heap-B: the document and one compiled copy)
// beside the cache's estimate of that (cost-1-copy-B) and of the most it
// may hold (cost-B: every copy a small schema may have).
func BenchmarkCompile(b *testing.B) {
	for _, c := range []struct {
		name string
		raw  string
	}{
		{"tool schema", `{"type":"object","properties":{"order_id":{"type":"string","description":"The order's id, as the customer wrote it"},"status":{"type":"string","enum":["shipped","pending","lost"]},"items":{"type":"array","items":{"type":"object","properties":{"sku":{"type":"string"},"qty":{"type":"integer","minimum":1}},"required":["sku","qty"],"additionalProperties":false}}},"required":["order_id","status"],"additionalProperties":false}`},
		{"5000 booleans", properties(5000, func(i int) string { return fmt.Sprintf(`"%d":true`, i) })},
		{"5000 empty", properties(5000, func(i int) string { return fmt.Sprintf(`"%d":{}`, i) })},
		{"5000 typed", properties(5000, func(i int) string { return fmt.Sprintf(`"p%d":{"type":"string"}`, i) })},
		{"2500 described", properties(2500, func(i int) string {
			return fmt.Sprintf(`"p%d":{"type":"string","description":"%s"}`, i, strings.Repeat("word ", 30))
		})},
		{"2400 arrays", properties(2400, func(i int) string {
			return fmt.Sprintf(`"p%d":{"type":"array","items":{"type":"integer","minimum":0}}`, i)
		})},
		{"nested 60", strings.Repeat(`{"type":"object","properties":{"a":`, 60) + `{}` + strings.Repeat(`}}`, 60)},
		{"enums", properties(10, func(i int) string { return fmt.Sprintf(`"p%d":{"enum":[%s]}`, i, repeat(99, `"a value of the enum"`)) })},
	} {
		b.Run(c.name, func(b *testing.B) {
			raw := json.RawMessage(c.raw)
			var s *Schema
			var before, after runtime.MemStats
			for b.Loop() {
				runtime.GC()
				runtime.ReadMemStats(&before)
				var err error
				if s, err = Compile(raw); err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
			}
			b.ReportMetric(float64(after.HeapAlloc)-float64(before.HeapAlloc), "heap-B")
			b.ReportMetric(float64(s.cost), "cost-B")
			b.ReportMetric(float64(estimate(len(raw), s.subschemas, 1)), "cost-1-copy-B")
			runtime.KeepAlive(s)
		})
	}
}
