package codec_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/durable-llm/durable-llm/codec"
)

func encrypted(t *testing.T, c *codec.Codec, v any) *commonpb.Payload {
	t.Helper()
	p, err := c.DataConverter().ToPayload(v)
	require.NoError(t, err)
	return p
}

func TestCodecServerDecodesForTheCLIAndSDKs(t *testing.T) {
	c := mustCodec(t, k2, k1)
	srv := httptest.NewServer(codec.NewHTTPHandler(c, codec.HandlerOptions{Token: "let-me-in"}))
	defer srv.Close()

	p := encrypted(t, mustCodec(t, k1), prompt) // written before the rotation
	remote := converter.NewRemotePayloadCodec(converter.RemotePayloadCodecOptions{
		Endpoint: srv.URL + "/default", // the UI and CLI may put the namespace in the path
		ModifyRequest: func(r *http.Request) error {
			r.Header.Set("Authorization", "Bearer let-me-in")
			return nil
		},
	})
	got, err := remote.Decode([]*commonpb.Payload{p})
	require.NoError(t, err)
	var s string
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(got[0], &s))
	require.Equal(t, prompt, s)

	enc, err := remote.Encode(got)
	require.NoError(t, err)
	require.Equal(t, "k2", string(enc[0].Metadata[codec.MetadataKeyID]))

	// Without the token: refused.
	anon := converter.NewRemotePayloadCodec(converter.RemotePayloadCodecOptions{Endpoint: srv.URL})
	_, err = anon.Decode([]*commonpb.Payload{p})
	require.ErrorContains(t, err, "Unauthorized")
}

func post(t *testing.T, h http.Handler, path string, body string, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func payloadsJSON(t *testing.T, ps ...*commonpb.Payload) string {
	t.Helper()
	b, err := protojson.Marshal(&commonpb.Payloads{Payloads: ps})
	require.NoError(t, err)
	return string(b)
}

func TestCodecServerCORSForTheWebUI(t *testing.T) {
	c := mustCodec(t, k1)
	h := codec.NewHTTPHandler(c, codec.HandlerOptions{Origins: []string{"http://localhost:8233/"}})

	// The browser's preflight, as the Web UI sends it.
	r := httptest.NewRequest(http.MethodOptions, "/decode", nil)
	r.Header.Set("Origin", "http://localhost:8233")
	r.Header.Set("Access-Control-Request-Method", "POST")
	r.Header.Set("Access-Control-Request-Headers", "content-type,x-namespace")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	require.Equal(t, http.StatusNoContent, w.Code)
	require.Equal(t, "http://localhost:8233", w.Header().Get("Access-Control-Allow-Origin"))
	require.Equal(t, "true", w.Header().Get("Access-Control-Allow-Credentials"))
	require.Contains(t, w.Header().Get("Access-Control-Allow-Headers"), "X-Namespace")

	w = post(t, h, "/decode", payloadsJSON(t, encrypted(t, c, prompt)),
		map[string]string{"Origin": "http://localhost:8233", "Content-Type": "application/json", "X-Namespace": "default"})
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.Equal(t, "http://localhost:8233", w.Header().Get("Access-Control-Allow-Origin"))
	var out commonpb.Payloads
	require.NoError(t, protojson.Unmarshal(w.Body.Bytes(), &out))
	require.Equal(t, `"`+prompt+`"`, string(out.Payloads[0].Data))

	// Another origin gets no CORS grant: the browser will not hand it the
	// decrypted payloads.
	w = post(t, h, "/decode", payloadsJSON(t, encrypted(t, c, prompt)), map[string]string{"Origin": "http://evil.example"})
	require.Empty(t, w.Header().Get("Access-Control-Allow-Origin"))
}

func TestCodecServerErrors(t *testing.T) {
	c := mustCodec(t, k1)
	h := codec.NewHTTPHandler(c, codec.HandlerOptions{})

	foreign := encrypted(t, mustCodec(t, codec.Key{ID: "other", Secret: secret(8)}), prompt)
	w := post(t, h, "/decode", payloadsJSON(t, foreign), nil)
	require.Equal(t, http.StatusBadRequest, w.Code)
	require.Contains(t, w.Body.String(), `key ID "other"`)
	require.NotContains(t, w.Body.String(), b64(secret(1)))

	w = post(t, h, "/decode", "{not json", nil)
	require.Equal(t, http.StatusBadRequest, w.Code)

	r := httptest.NewRequest(http.MethodGet, "/healthz", nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	require.Equal(t, http.StatusOK, rec.Code)
	body, _ := io.ReadAll(rec.Body)
	require.Equal(t, "ok\n", string(body))

	r = httptest.NewRequest(http.MethodGet, "/decode", nil)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	require.Equal(t, http.StatusNotFound, rec.Code)
}
