package llmclient

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestWaitEnded: a server's DEADLINE_EXCEEDED just before the wait's own
// deadline is that deadline (the call still runs); long before it, or any
// other error, is not.
func TestWaitEnded(t *testing.T) {
	server := status.Error(codes.DeadlineExceeded, "stream terminated by RST_STREAM with error code: CANCEL")
	near, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	far, cancelFar := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelFar()
	gone, cancelGone := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancelGone()
	<-gone.Done()
	for _, c := range []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"server ends the wait at its deadline", near, server, true},
		{"the wait's own timer fired", gone, context.DeadlineExceeded, true},
		{"server's deadline long before the wait's", far, server, false},
		{"another error near the deadline", near, errors.New("workflow failed"), false},
		{"no deadline", context.Background(), server, false},
	} {
		if got := WaitEnded(c.ctx, c.err); got != c.want {
			t.Errorf("%s: WaitEnded = %v, want %v", c.name, got, c.want)
		}
	}
}
