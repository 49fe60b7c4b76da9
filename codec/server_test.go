package codec_test

import (
	"io"
	"net"
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
	r.RemoteAddr = "127.0.0.1:40000" // a local client, unless hdr says otherwise
	if a, ok := hdr["RemoteAddr"]; ok {
		r.RemoteAddr = a
		delete(hdr, "RemoteAddr")
	}
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

	w := post(t, h, "/decode", "{not json", nil)
	require.Equal(t, http.StatusBadRequest, w.Code)

	r := httptest.NewRequest(http.MethodGet, "/healthz", nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	require.Equal(t, http.StatusOK, rec.Code)
	body, _ := io.ReadAll(rec.Body)
	require.Equal(t, "ok\n", string(body))

	r = httptest.NewRequest(http.MethodGet, "/decode", nil)
	r.RemoteAddr = "127.0.0.1:40000"
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	require.Equal(t, http.StatusNotFound, rec.Code)
}

// TestCodecServerDecodesTheRestOfABatch: one payload the server cannot
// decode (another deployment's key, a tampered one) comes back as it was,
// marked with why, and the page of payloads around it still decodes.
func TestCodecServerDecodesTheRestOfABatch(t *testing.T) {
	c := mustCodec(t, k1)
	h := codec.NewHTTPHandler(c, codec.HandlerOptions{})

	foreign := encrypted(t, mustCodec(t, codec.Key{ID: "other", Secret: secret(8)}), prompt)
	w := post(t, h, "/decode", payloadsJSON(t, encrypted(t, c, "first"), foreign, encrypted(t, c, "third")), nil)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	var out commonpb.Payloads
	require.NoError(t, protojson.Unmarshal(w.Body.Bytes(), &out))
	require.Len(t, out.Payloads, 3)
	require.Equal(t, `"first"`, string(out.Payloads[0].Data))
	require.Equal(t, `"third"`, string(out.Payloads[2].Data))

	bad := out.Payloads[1]
	require.Equal(t, foreign.Data, bad.Data, "the payload that does not decode comes back as it was")
	require.Equal(t, codec.EncodingEncrypted, string(bad.Metadata[converter.MetadataEncoding]))
	why := string(bad.Metadata[codec.MetadataDecodeError])
	require.Contains(t, why, `key ID "other"`)
	require.NotContains(t, why, b64(secret(1)))
}

// TestCodecServerEncodeNeedsAToken: /encode encrypts whatever it is given
// with the deployment's key, so that a forged call would pass for one of
// ours: never without a token.
func TestCodecServerEncodeNeedsAToken(t *testing.T) {
	c := mustCodec(t, k1)
	plain := &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`"forged"`)}

	open := codec.NewHTTPHandler(c, codec.HandlerOptions{})
	w := post(t, open, "/encode", payloadsJSON(t, plain), nil)
	require.Equal(t, http.StatusForbidden, w.Code, "a server without a token encrypted for a caller")
	require.Contains(t, w.Body.String(), "CODEC_SERVER_TOKEN")

	token := strings.Repeat("t0k", 12)
	locked := codec.NewHTTPHandler(c, codec.HandlerOptions{Token: token})
	w = post(t, locked, "/encode", payloadsJSON(t, plain), nil)
	require.Equal(t, http.StatusUnauthorized, w.Code)
	w = post(t, locked, "/encode", payloadsJSON(t, plain), map[string]string{"Authorization": "Bearer " + token})
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	var out commonpb.Payloads
	require.NoError(t, protojson.Unmarshal(w.Body.Bytes(), &out))
	require.Equal(t, "k1", string(out.Payloads[0].Metadata[codec.MetadataKeyID]))
}

// TestCodecServerWithoutATokenServesLoopbackOnly: a handler without a
// token decodes for local clients only, wherever it is mounted.
func TestCodecServerWithoutATokenServesLoopbackOnly(t *testing.T) {
	c := mustCodec(t, k1)
	h := codec.NewHTTPHandler(c, codec.HandlerOptions{})
	body := payloadsJSON(t, encrypted(t, c, prompt))
	for _, tc := range []struct {
		remote string
		want   int
	}{
		{"127.0.0.1:50000", http.StatusOK},
		{"[::1]:50000", http.StatusOK},
		{"10.0.0.7:50000", http.StatusForbidden},
		{"172.18.0.1:50000", http.StatusForbidden}, // a container network's gateway
	} {
		t.Run(tc.remote, func(t *testing.T) {
			w := post(t, h, "/decode", body, map[string]string{"RemoteAddr": tc.remote})
			require.Equal(t, tc.want, w.Code, w.Body.String())
			if tc.want != http.StatusOK {
				require.NotContains(t, w.Body.String(), prompt)
			}
		})
	}
}

// TestCodecServerNeverCredentialsForAnyOrigin: "*" lets any page call,
// so it never lets one send the browser's cookies.
func TestCodecServerNeverCredentialsForAnyOrigin(t *testing.T) {
	c := mustCodec(t, k1)
	h := codec.NewHTTPHandler(c, codec.HandlerOptions{Origins: []string{"*", "http://localhost:8080"}, Token: strings.Repeat("x", 40)})
	for _, tc := range []struct {
		origin, allow, creds string
	}{
		{"http://evil.example", "*", ""},
		{"http://localhost:8080", "http://localhost:8080", "true"},
	} {
		t.Run(tc.origin, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodOptions, "/decode", nil)
			r.Header.Set("Origin", tc.origin)
			r.Header.Set("Access-Control-Request-Method", "POST")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			require.Equal(t, tc.allow, w.Header().Get("Access-Control-Allow-Origin"))
			require.Equal(t, tc.creds, w.Header().Get("Access-Control-Allow-Credentials"))
		})
	}
}

// TestCodecServerLoginForTheWebUI: a browser cannot send a bearer token;
// it logs in once and the Web UI's calls carry the cookie, which never
// holds the token itself.
func TestCodecServerLoginForTheWebUI(t *testing.T) {
	c := mustCodec(t, k1)
	token := strings.Repeat("s3cr3t-", 6)
	h := codec.NewHTTPHandler(c, codec.HandlerOptions{Origins: []string{"http://localhost:8080"}, Token: token})

	form := func(tok string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader("token="+tok))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	w := form("wrong")
	require.Equal(t, http.StatusUnauthorized, w.Code)
	require.Empty(t, w.Result().Cookies())

	w = form(token)
	require.Equal(t, http.StatusOK, w.Code)
	cookies := w.Result().Cookies()
	require.Len(t, cookies, 1)
	ck := cookies[0]
	require.Equal(t, codec.CookieName, ck.Name)
	require.True(t, ck.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, ck.SameSite)
	require.NotContains(t, ck.Value, token)

	body := payloadsJSON(t, encrypted(t, c, prompt))
	w = post(t, h, "/decode", body, map[string]string{"Origin": "http://localhost:8080", "Cookie": ck.Name + "=" + ck.Value, "RemoteAddr": "172.18.0.1:50000"})
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	var out commonpb.Payloads
	require.NoError(t, protojson.Unmarshal(w.Body.Bytes(), &out))
	require.Equal(t, `"`+prompt+`"`, string(out.Payloads[0].Data))
	// The MAC's last hex digit changed (to one it is not: "0" alone would
	// leave one cookie in 16 as it was).
	last := "0"
	if strings.HasSuffix(ck.Value, "0") {
		last = "1"
	}
	w = post(t, h, "/decode", body, map[string]string{"Cookie": ck.Name + "=" + ck.Value[:len(ck.Value)-1] + last, "RemoteAddr": "172.18.0.1:50000"})
	require.Equal(t, http.StatusUnauthorized, w.Code)
}

func TestCheckExposure(t *testing.T) {
	long := strings.Repeat("a", codec.MinTokenLength)
	for _, tc := range []struct {
		addr, token, want string
	}{
		{"127.0.0.1:8081", "", ""},
		{"[::1]:8081", "", ""},
		{"0.0.0.0:8081", "", "needs a bearer token"},
		{"[::]:8081", "", "needs a bearer token"},
		{"10.1.2.3:8081", "", "needs a bearer token"},
		{"0.0.0.0:8081", long, ""},
		{"127.0.0.1:8081", "short-token", "at least 32"},
	} {
		t.Run(tc.addr+"/"+tc.token, func(t *testing.T) {
			addr, err := net.ResolveTCPAddr("tcp", tc.addr)
			require.NoError(t, err)
			err = codec.CheckExposure(addr, tc.token)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.want)
			if tc.token != "" {
				require.NotContains(t, err.Error(), tc.token)
			}
		})
	}
}
