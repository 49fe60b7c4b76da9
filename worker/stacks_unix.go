//go:build unix

package main

import (
	"os"
	"strings"
	"syscall"
)

// smallStacks re-executes the worker, once and before anything else, with
// GODEBUG=adaptivestackstart=0 added when GODEBUG does not set it. Go reads
// that setting only at start-up and refuses it in a //go:debug line, and
// with it on, the worker's deep workflow and activity stacks size every new
// goroutine: 1,000 streamed calls in flight held 18 MB more of stacks
// (bench/results/memory.md). exec keeps the process id, so supervisors and
// signals see no difference; if it fails the worker runs as it is.
func smallStacks() {
	env, again := stackEnv(os.Environ())
	if !again {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		return
	}
	_ = syscall.Exec(exe, os.Args, env)
}

// stackEnv is environ with adaptivestackstart=0 added to GODEBUG, and
// whether that changed anything. The old GODEBUG entries are replaced, not
// kept beside the new one: a process reads the first of two, and would
// then exec itself again, forever.
func stackEnv(environ []string) ([]string, bool) {
	godebug := ""
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
			godebug = v
			break
		}
	}
	if strings.Contains(godebug, "adaptivestackstart=") {
		return environ, false
	}
	if godebug != "" {
		godebug += ","
	}
	env := []string{"GODEBUG=" + godebug + "adaptivestackstart=0"}
	for _, kv := range environ {
		if !strings.HasPrefix(kv, "GODEBUG=") {
			env = append(env, kv)
		}
	}
	return env, true
}
