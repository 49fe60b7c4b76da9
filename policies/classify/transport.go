package classify

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	openai "github.com/sashabaranov/go-openai"
)

// errKind names the kind of a transport or decoding error in the
// product's words, for a reason: its text (Verdict.Detail) may name the
// upstream's address.
func errKind(err error) string {
	var netErr net.Error
	switch {
	case errors.Is(err, context.Canceled):
		return "context canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "context deadline exceeded"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "unexpected EOF"
	case errors.Is(err, io.EOF):
		return "EOF"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset by peer"
	case errors.Is(err, syscall.ECONNABORTED):
		return "connection aborted"
	case errors.Is(err, syscall.EPIPE):
		return "broken pipe"
	case isJSONError(err):
		return "malformed JSON"
	case errors.As(err, &netErr) && netErr.Timeout():
		return "i/o timeout"
	}
	if why, ok := connectFailure(err); ok {
		return why
	}
	return "transport error"
}

func isHeaderTimeout(err error) bool {
	return strings.Contains(err.Error(), "timeout awaiting response headers")
}

// connectFailure recognises failures before the request was sent: dial,
// DNS, TLS handshake, proxy connect, refused or unreachable, or a
// connection that broke while the request was being written.
func connectFailure(err error) (string, bool) {
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return "DNS lookup failed", true
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		switch opErr.Op {
		case "dial":
			return "dial failed", true
		case "proxyconnect":
			return "proxy connect failed", true
		case "write":
			return "connection broke while sending the request", true
		}
	}
	var (
		certErr     *tls.CertificateVerificationError
		recordErr   tls.RecordHeaderError
		alertErr    tls.AlertError
		authorityEr x509.UnknownAuthorityError
		hostnameErr x509.HostnameError
		invalidErr  x509.CertificateInvalidError
	)
	if errors.As(err, &certErr) || errors.As(err, &recordErr) || errors.As(err, &alertErr) ||
		errors.As(err, &authorityEr) || errors.As(err, &hostnameErr) || errors.As(err, &invalidErr) ||
		strings.Contains(err.Error(), "tls: ") {
		return "TLS handshake failed", true
	}
	if strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") {
		return "TLS handshake failed (the server speaks plain HTTP)", true
	}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused", true
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "upstream unreachable", true
	}
	return "", false
}

func isJSONError(err error) bool {
	var syntaxErr *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	return errors.As(err, &syntaxErr) || errors.As(err, &typeErr)
}

// ErrNotTranslatable is a request the model's API has no words for (a
// tool call's arguments that are not an object, for the Messages API):
// refused before sending, class invalid_request.
var ErrNotTranslatable = errors.New("the request cannot be said in the model's API")

// clientLibraryRefusals are the checks before sending: go-openai's, and a
// request the model's API cannot say.
var clientLibraryRefusals = []error{ErrNotTranslatable,
	openai.ErrChatCompletionInvalidModel, openai.ErrChatCompletionStreamNotSupported,
	openai.ErrContentFieldsMisused, openai.ErrReasoningEffortUnsupported,
	openai.ErrReasoningToolsRequireResponses, openai.ErrReasoningSamplingUnsupported,
	openai.ErrO1MaxTokensDeprecated, openai.ErrO1BetaLimitationsMessageTypes,
	openai.ErrO1BetaLimitationsTools, openai.ErrO1BetaLimitationsLogprobs,
	openai.ErrO1BetaLimitationsOther, openai.ErrReasoningModelMaxTokensDeprecated,
	openai.ErrReasoningModelLimitationsLogprobs, openai.ErrReasoningModelLimitationsOther,
}

func isClientLibraryRefusal(err error) bool {
	for _, e := range clientLibraryRefusals {
		if errors.Is(err, e) {
			return true
		}
	}
	var marshalErr *json.MarshalerError
	var unsupported *json.UnsupportedValueError
	return errors.As(err, &marshalErr) || errors.As(err, &unsupported)
}
