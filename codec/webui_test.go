package codec_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/log"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/durable-llm/durable-llm/codec"
	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/testkit/rig"
	"github.com/durable-llm/durable-llm/testkit/testenv"
	"github.com/durable-llm/durable-llm/testkit/uicheck"
	"github.com/durable-llm/durable-llm/workflows"
)

// TestWebUIShowsDecryptedPayloadsThroughTheCodecServer starts the dev
// server's Web UI with --ui-codec-endpoint pointing at the codec server,
// runs an encrypted call, and checks in headless Chromium that an operator
// sees the question and the answer in clear, decrypted by the browser's
// calls to the codec server.
func TestWebUIShowsDecryptedPayloadsThroughTheCodecServer(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: needs the Temporal dev server and Chromium (skipped in -short mode)")
	}
	chromium := uicheck.Chromium()
	if chromium == "" {
		t.Skip("Chromium is not installed (apt-get install chromium, or set CHROMIUM): the Web UI codec check needs a real browser")
	}
	c := mustCodec(t, codec.Key{ID: "ui-k1", Secret: secret(0x33)})

	uiPort := testenv.FreePort(t)
	uiBase := "http://127.0.0.1:" + uiPort
	var browserDecodes atomic.Int32
	h := codec.NewHTTPHandler(c, codec.HandlerOptions{Origins: []string{uiBase}})
	codecSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/decode") && r.Header.Get("Origin") == uiBase {
			browserDecodes.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(codecSrv.Close)

	srv := testenv.Server(t, workflows.SearchAttributes, testenv.ServerOptions{
		UIPort: uiPort, ExtraArgs: []string{"--ui-codec-endpoint", codecSrv.URL},
	})
	testenv.WaitServes(t, uiBase+"/")

	cl, err := client.Dial(client.Options{HostPort: srv.FrontendHostPort(), Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler)),
		DataConverter: c.DataConverter(), FailureConverter: c.FailureConverter()})
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	s := rig.New(t, rig.Options{Client: cl, QueuePrefix: "llm-ui-codec-"})

	lc := &llmclient.Client{Temporal: cl, TaskQueue: s.TaskQueue, UIBase: uiBase}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := lc.Call(ctx, workflows.CallRequest{
		UserID: "u-" + uuid.NewString()[:8], SessionID: "s-1", Scenario: "customer_service",
		Messages: []request.Message{{Role: "user", Content: "Where is parcel " + parcel + " for " + customer + "?"}},
	})
	require.NoError(t, err)
	require.Contains(t, res.Content, customer)

	b, err := uicheck.Start(uicheck.Options{Path: chromium})
	require.NoError(t, err)
	t.Cleanup(b.Close)
	page := lc.UILink(res.RequestID)
	require.NoError(t, b.Open(page))
	// The summary (top of the page) and the input and result JSON are
	// decrypted payloads.
	text, err := b.WaitText("", 90*time.Second, "Where is parcel "+parcel, customer)
	require.NoError(t, err, "the Web UI page %s does not show the decrypted question", page)
	require.NotContains(t, text, codec.EncodingEncrypted, "the UI shows an encrypted payload")
	require.Positive(t, browserDecodes.Load(), "the browser never called the codec server")

	png, err := b.Screenshot()
	require.NoError(t, err)
	shot := filepath.Join(t.ArtifactDir(), "ui-codec.png")
	require.NoError(t, os.WriteFile(shot, png, 0o644))
	t.Logf("%d decode calls from the browser; screenshot %s", browserDecodes.Load(), shot)
}
