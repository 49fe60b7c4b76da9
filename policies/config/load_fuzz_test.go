package config

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// FuzzParseConfig feeds arbitrary bytes to the policy loader and checks
// what the worker relies on at start-up, beyond not panicking:
//   - a refusal is an *Error that names the file and, for every problem,
//     says what is expected; a problem with a field path names a field of
//     the policy (its first part is a section of Config) or says that the
//     file's own key is unknown or written twice;
//   - an accepted policy passes Validate again, keeps its source, and
//     loads to the same Config each time;
//   - loading never changes the embedded default, and ends (within 10 s).
//
// The seed corpus is in testdata/fuzz/FuzzParseConfig; plain go test runs
// it.
func FuzzParseConfig(f *testing.F) {
	// Small seeds only: the fuzzer minimizes each new input it finds,
	// and a mutated copy of the whole default policy (TestDefaultConfig
	// loads it) takes minutes to minimize.
	f.Add([]byte(minimal))
	sections := map[string]bool{}
	ct := reflect.TypeOf(Config{})
	for i := 0; i < ct.NumField(); i++ {
		if tag, _, _ := strings.Cut(ct.Field(i).Tag.Get("yaml"), ","); tag != "" && tag != "-" {
			sections[tag] = true
		}
	}
	pristine := DefaultConfig()
	const source = "fuzz.yaml"
	f.Fuzz(func(t *testing.T, data []byte) {
		// A hang is a failure too: the fuzzer saves the input of a
		// crashed worker, not of a slow one.
		hung := time.AfterFunc(10*time.Second, func() { panic(fmt.Sprintf("ParseConfig took over 10s on %q", data)) })
		defer hung.Stop()
		cfg, err := ParseConfig(data, source)
		if !reflect.DeepEqual(DefaultConfig(), pristine) {
			t.Fatalf("loading changed the embedded default policy")
		}
		if err != nil {
			if cfg != nil {
				t.Fatalf("a refused policy came with a config")
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("refusal is a %T, not an *Error naming the file: %v", err, err)
			}
			if ce.Source != source || len(ce.Problems) == 0 {
				t.Fatalf("refusal names source %q with %d problem(s): %v", ce.Source, len(ce.Problems), err)
			}
			for _, p := range ce.Problems {
				if strings.TrimSpace(p.Message) == "" {
					t.Fatalf("problem at %q (line %d) says nothing", p.Path, p.Line)
				}
				if p.Line < 0 {
					t.Fatalf("problem %q at line %d", p.Message, p.Line)
				}
				if p.Path == "" {
					continue // a problem of the whole file (YAML syntax, a second document)
				}
				root := p.Path
				if i := strings.IndexAny(root, ".["); i >= 0 {
					root = root[:i]
				}
				ownKey := strings.HasPrefix(p.Message, "unknown field") || strings.HasPrefix(p.Message, "mapping key ")
				if !sections[root] && !ownKey {
					t.Fatalf("problem names %q, not a field of the policy: %s", p.Path, p.Message)
				}
			}
			if msg := err.Error(); !strings.HasPrefix(msg, source+": ") {
				t.Fatalf("error does not start with the file name: %q", msg)
			}
			return
		}
		if cfg == nil {
			t.Fatal("neither a config nor an error")
		}
		if cfg.Source != source {
			t.Fatalf("Source %q, want %q", cfg.Source, source)
		}
		if verr := cfg.Validate(); verr != nil {
			t.Fatalf("an accepted policy fails Validate:\n%v", verr)
		}
		again, err := ParseConfig(data, source)
		if err != nil || !reflect.DeepEqual(cfg, again) {
			t.Fatalf("the same bytes loaded differently the second time (error %v)", err)
		}
	})
}
