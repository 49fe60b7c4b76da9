package config

import (
	"strings"
	"testing"
)

// TestMaxBodyBytes: the default bounds an upstream reply well under
// Temporal's 2 MB payload limit; a file may set another size within the
// range, and a size outside it (0 included: no unlimited reads) is refused
// naming the field, its line and the range.
func TestMaxBodyBytes(t *testing.T) {
	if got := DefaultConfig().HTTP.MaxBodyBytes; got != 1<<20 {
		t.Errorf("default http.max_body_bytes = %d, want 1 MiB", got)
	}
	cfg := mustParse(t, minimal+"http:\n  max_body_bytes: 65536\n")
	if cfg.HTTP.MaxBodyBytes != 65536 || cfg.HTTP.ConnectTimeout != DefaultConfig().HTTP.ConnectTimeout {
		t.Errorf("http = %+v, want max_body_bytes 65536 and the default connect_timeout", cfg.HTTP)
	}
	for _, n := range []string{"0", "-1", "4095", "1572865", "2097152"} {
		_, err := ParseConfig([]byte(minimal+"http:\n  max_body_bytes: "+n+"\n"), "bad.yaml")
		want := "bad.yaml: http.max_body_bytes: must be from 4096 to 1572864 bytes"
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "got "+n+" (line 9)") {
			t.Errorf("max_body_bytes %s: error %v, want %q … got %s (line 9)", n, err, want, n)
		}
	}
}
