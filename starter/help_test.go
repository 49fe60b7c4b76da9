package main

import (
	"context"
	"io"
	"testing"
)

// TestHelpSucceeds: "starter <command> -h" prints the command's flags and
// succeeds, as "starter --help" does; asking for help is not an error.
func TestHelpSucceeds(t *testing.T) {
	for _, args := range [][]string{
		{"--help"}, {"ask", "-h"}, {"ask", "--help"}, {"show", "-h"}, {"replay", "-h"}, {"serve", "--help"},
		{"codec-server", "-h"}, {"usage", "-h"}, {"doctor", "-h"}, {"feedback", "-h"}, {"rules", "-h"},
		{"review", "list", "-h"},
	} {
		if err := run(context.Background(), args, io.Discard); err != nil {
			t.Errorf("starter %v: %v, want success", args, err)
		}
	}
	if err := run(context.Background(), []string{"ask", "--no-such-flag"}, io.Discard); err == nil {
		t.Error("starter ask --no-such-flag succeeded, want an error")
	}
}
