//go:build !linux

package realllm

import (
	"os"
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr { return nil }

func terminate(p *os.Process) { _ = p.Signal(os.Interrupt) }
func kill(p *os.Process)      { _ = p.Kill() }
