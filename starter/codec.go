package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/durable-llm/durable-llm/codec"
)

// codecServer serves /encode and /decode with the payload keys of
// LLM_PAYLOAD_KEYS, so the Web UI (--ui-codec-endpoint, or the UI's
// TEMPORAL_CODEC_ENDPOINT) and the CLI (--codec-endpoint) show decrypted
// payloads. CODEC_SERVER_TOKEN, when set, is the bearer token callers must
// send.
func codecServer(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("codec-server", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8081", "listen address")
	origins := fs.String("web-ui-origin", "http://localhost:8233,http://127.0.0.1:8233",
		`Web UI origins allowed by CORS, comma-separated ("*": any; empty: none)`)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: starter codec-server [--addr 127.0.0.1:8081] [--web-ui-origin http://localhost:8233]

Serves the codec-server API (POST /encode, /decode; GET /healthz) with the
keys of %s, for the Web UI:
  temporal server start-dev --ui-codec-endpoint http://127.0.0.1:8081
and the CLI:
  temporal workflow show -w <id> --codec-endpoint http://127.0.0.1:8081
CODEC_SERVER_TOKEN, when set, must be sent as "Authorization: Bearer <token>"
(the CLI's --codec-auth). Keep the server on a private address: it decrypts
for whoever can reach it.

`, codec.EnvKeys)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("codec-server: unexpected argument %q", fs.Arg(0))
	}
	c, err := codec.FromEnv(os.Getenv)
	if err != nil {
		return err
	}
	if c == nil {
		return fmt.Errorf("codec-server: %s is not set; generate a key with `openssl rand -base64 32` and set %s=k1:<key>", codec.EnvKeys, codec.EnvKeys)
	}
	var allowed []string
	for _, o := range strings.Split(*origins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			allowed = append(allowed, o)
		}
	}
	token := os.Getenv("CODEC_SERVER_TOKEN")
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("codec-server: %w", err)
	}
	srv := &http.Server{
		Handler:           codec.NewHTTPHandler(c, codec.HandlerOptions{Origins: allowed, Token: token}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	auth := "none (keep it on a private address)"
	if token != "" {
		auth = "bearer token from CODEC_SERVER_TOKEN"
	}
	fmt.Fprintf(out, "codec server listening on http://%s\n  keys: %s (encrypts with %s)\n  CORS origins: %s\n  auth: %s\n",
		ln.Addr(), strings.Join(c.KeyIDs(), ", "), c.ActiveKeyID(), orNone(allowed), auth)

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
