package llmclient

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/api/serviceerror"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// WaitEnded reports whether a wait for a call under wctx ended at wctx's
// own deadline: wctx's timer fired, or err is the Temporal server ending
// the wait there. The server learns the deadline from the request and can
// answer DEADLINE_EXCEEDED a moment before wctx's timer fires on this
// side; that is the wait's limit, not a failed call nor an unreachable
// service.
func WaitEnded(wctx context.Context, err error) bool {
	if errors.Is(wctx.Err(), context.DeadlineExceeded) {
		return true
	}
	d, ok := wctx.Deadline()
	if !ok || time.Until(d) > deadlineSlack {
		return false
	}
	var de *serviceerror.DeadlineExceeded
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &de) || status.Code(err) == codes.DeadlineExceeded
}

// deadlineSlack is how early before a wait's deadline a server's
// DEADLINE_EXCEEDED still counts as that deadline.
const deadlineSlack = 500 * time.Millisecond
