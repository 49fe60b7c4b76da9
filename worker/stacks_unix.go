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
	godebug := os.Getenv("GODEBUG")
	if strings.Contains(godebug, "adaptivestackstart=") {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		return
	}
	if godebug != "" {
		godebug += ","
	}
	env := append(os.Environ(), "GODEBUG="+godebug+"adaptivestackstart=0")
	_ = syscall.Exec(exe, os.Args, env)
}
