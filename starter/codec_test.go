package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/durable-llm/durable-llm/codec"
)

func TestCodecServerRefusesToStartWithoutGoodKeys(t *testing.T) {
	t.Setenv(codec.EnvKeys, "")
	err := run(context.Background(), []string{"codec-server"}, io.Discard)
	require.ErrorContains(t, err, codec.EnvKeys+" is not set")
	require.ErrorContains(t, err, "openssl rand -base64 32")

	short := base64.StdEncoding.EncodeToString([]byte("only-sixteen-byt"))
	t.Setenv(codec.EnvKeys, "k1:"+short)
	err = run(context.Background(), []string{"codec-server"}, io.Discard)
	require.ErrorContains(t, err, "LLM_PAYLOAD_KEYS: entry 1: the key is 16 bytes, AES-256 needs 32")
	require.NotContains(t, err.Error(), short)
}

func TestCodecServerCommandServesAndStops(t *testing.T) {
	t.Setenv(codec.EnvKeys, "k2:"+base64.StdEncoding.EncodeToString(make([]byte, 32))+",k1:"+base64.StdEncoding.EncodeToString(make([]byte, 32)[:31])+"A")
	err := run(context.Background(), []string{"codec-server"}, io.Discard)
	require.Error(t, err, "a malformed second key is refused too")

	t.Setenv(codec.EnvKeys, "k2:"+base64.StdEncoding.EncodeToString(make([]byte, 32)))
	t.Setenv("CODEC_SERVER_TOKEN", strings.Repeat("tok", 11))
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"codec-server", "--addr", "127.0.0.1:0", "--web-ui-origin", "http://localhost:8080"}, pw)
		_ = pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	require.True(t, sc.Scan())
	url, ok := strings.CutPrefix(sc.Text(), "codec server listening on ")
	require.True(t, ok, sc.Text())
	var banner []string
	for i := 0; i < 3 && sc.Scan(); i++ {
		banner = append(banner, sc.Text())
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	require.Contains(t, strings.Join(banner, "\n"), "keys: k2 (encrypts with k2)")
	require.Contains(t, strings.Join(banner, "\n"), "CORS origins: http://localhost:8080")
	require.Contains(t, strings.Join(banner, "\n"), "auth: bearer token from CODEC_SERVER_TOKEN")

	resp, err := http.Get(url + "/healthz")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, err = http.Post(url+"/decode", "application/json", strings.NewReader(`{"payloads":[]}`))
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "CODEC_SERVER_TOKEN is enforced")

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err, "Ctrl-C stops the codec server cleanly")
	case <-time.After(30 * time.Second):
		t.Fatal("the codec server did not stop")
	}
}

// TestCodecServerRefusesToServeOpenBeyondLoopback: a codec server on an
// address others can reach decrypts history for them and encrypts forged
// calls: it does not start without a token, nor with a short one.
func TestCodecServerRefusesToServeOpenBeyondLoopback(t *testing.T) {
	t.Setenv(codec.EnvKeys, "k1:"+base64.StdEncoding.EncodeToString(make([]byte, 32)))
	t.Setenv("CODEC_SERVER_TOKEN", "")
	// A server that starts anyway is stopped after a while (and fails the test).
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := run(ctx, []string{"codec-server", "--addr", "0.0.0.0:0"}, io.Discard)
	require.ErrorIs(t, err, codec.ErrTokenRequired)
	require.ErrorContains(t, err, "CODEC_SERVER_TOKEN")

	t.Setenv("CODEC_SERVER_TOKEN", "short-and-guessable")
	err = run(ctx, []string{"codec-server", "--addr", "0.0.0.0:0"}, io.Discard)
	require.ErrorContains(t, err, "at least 32")
	require.NotContains(t, err.Error(), "short-and-guessable")
}
