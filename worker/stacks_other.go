//go:build !unix

package main

// smallStacks does nothing where exec is not available; set
// GODEBUG=adaptivestackstart=0 in the worker's environment instead.
func smallStacks() {}
