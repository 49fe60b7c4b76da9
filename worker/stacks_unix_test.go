//go:build unix

package main

import (
	"slices"
	"strings"
	"testing"
)

func TestStackEnv(t *testing.T) {
	for _, c := range []struct {
		in    []string
		want  string
		again bool
	}{
		{[]string{"PATH=/bin"}, "GODEBUG=adaptivestackstart=0", true},
		{[]string{"GODEBUG=http2client=0", "PATH=/bin"}, "GODEBUG=http2client=0,adaptivestackstart=0", true},
		{[]string{"GODEBUG=", "PATH=/bin"}, "GODEBUG=adaptivestackstart=0", true},
		{[]string{"GODEBUG=adaptivestackstart=1"}, "GODEBUG=adaptivestackstart=1", false},
	} {
		env, again := stackEnv(c.in)
		var godebug []string
		for _, kv := range env {
			if strings.HasPrefix(kv, "GODEBUG=") {
				godebug = append(godebug, kv)
			}
		}
		if again != c.again || !slices.Equal(godebug, []string{c.want}) {
			t.Errorf("stackEnv(%q) = %q, %v; want one %q, %v", c.in, env, again, c.want, c.again)
		}
		if again {
			// The new environment must not ask for another exec.
			if _, more := stackEnv(env); more {
				t.Errorf("stackEnv(%q) would exec again", env)
			}
		}
	}
}
