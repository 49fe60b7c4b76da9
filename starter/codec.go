package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/durable-llm/durable-llm/codec"
)

// codecServer serves /encode and /decode with the payload keys of
// LLM_PAYLOAD_KEYS, so the Web UI (--ui-codec-endpoint, or the UI's
// TEMPORAL_CODEC_ENDPOINT) and the CLI (--codec-endpoint) show decrypted
// payloads. CODEC_SERVER_TOKEN is the bearer token callers must send; it
// is required unless the server is bound to loopback.
func codecServer(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("codec-server", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8081", "listen address")
	origins := fs.String("web-ui-origin", "http://localhost:8233,http://127.0.0.1:8233",
		`Web UI origins allowed by CORS, with credentials, comma-separated ("*": any, without credentials; empty: none)`)
	maxConns := fs.Int("max-conns", defaultMaxConns, "connections served at once; more wait (env CODEC_SERVER_MAX_CONNS)")
	bodyTimeout := fs.Duration("body-timeout", 30*time.Second, "time a request's body may take to arrive")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: starter codec-server [--addr 127.0.0.1:8081] [--web-ui-origin http://localhost:8233]

Serves the codec-server API (POST /encode, /decode; GET /healthz) with the
keys of %s, for the Web UI:
  temporal server start-dev --ui-codec-endpoint http://127.0.0.1:8081
and the CLI:
  temporal workflow show -w <id> --codec-endpoint http://127.0.0.1:8081
CODEC_SERVER_TOKEN (at least 32 characters, e.g. openssl rand -hex 32) must
be sent as "Authorization: Bearer <token>" (the CLI's --codec-auth), or, from
a browser, as the cookie that logging in at /login sets (the Web UI sends it
with TEMPORAL_CODEC_INCLUDE_CREDENTIALS=true). It is required unless --addr
is a loopback address; without it, /encode is off and only loopback
clients may decode.

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
	token := os.Getenv(codecTokenEnv)
	if err := connLimit(fs, maxConns, "CODEC_SERVER_MAX_CONNS"); err != nil {
		return fmt.Errorf("codec-server: %w", err)
	}
	if *bodyTimeout <= 0 {
		return fmt.Errorf("codec-server: --body-timeout must be positive, got %s", *bodyTimeout)
	}
	ln, err := listen(*addr, *maxConns)
	if err != nil {
		return fmt.Errorf("codec-server: %w", err)
	}
	if err := codec.CheckExposure(ln.Addr(), token); err != nil {
		_ = ln.Close()
		return fmt.Errorf("codec-server: %s: %w", codecTokenEnv, err)
	}
	srv := &http.Server{
		Handler:           codec.NewHTTPHandler(c, codec.HandlerOptions{Origins: allowed, Token: token, BodyTimeout: *bodyTimeout}),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	auth := "none: loopback clients may decode, /encode is off"
	if token != "" {
		auth = "bearer token from " + codecTokenEnv + " (browsers: log in at /login)"
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

// codecTokenEnv holds the codec server's bearer token.
const codecTokenEnv = "CODEC_SERVER_TOKEN"

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
