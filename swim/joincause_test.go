package swim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/shoalmq/shoal/netio"
)

func TestJoinFailureCause(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("%w: 10.0.0.1:7301: %w", netio.ErrPushPull, err) }
	for _, tc := range []struct {
		err  error
		want string
	}{
		{wrap(&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}), JoinUnreachable},
		{wrap(&net.OpError{Op: "dial", Net: "tcp", Err: errors.New("no route")}), JoinUnreachable},
		{wrap(io.EOF), JoinUnreachable},
		{wrap(context.DeadlineExceeded), JoinUnreachable},
		{wrap(fmt.Errorf("cluster 43: %w", netio.ErrWrongCluster)), JoinWrongCluster},
		{ErrStateWrongCluster, JoinWrongCluster},
		{wrap(fmt.Errorf("HelloAuth did not verify: %w", netio.ErrAuthFailed)), JoinAuth},
		{ErrStateUnauthenticated, JoinAuth},
		{wrap(errors.New("something else")), JoinRefused},
	} {
		if got := JoinFailureCause(tc.err); got != tc.want {
			t.Errorf("JoinFailureCause(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
