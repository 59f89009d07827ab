package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

func TestRedisUnreachable(t *testing.T) {
	t.Parallel()
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: &net.AddrError{Err: "x"}}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"dial error", fmt.Errorf("tasks: transition: %w", refused), true},
		{"refused errno", fmt.Errorf("wrapped: %w", syscall.ECONNREFUSED), true},
		{"reset errno", syscall.ECONNRESET, true},
		{"eof", fmt.Errorf("x: %w", io.EOF), true},
		{"pool timeout", redis.ErrPoolTimeout, true},
		{"aof loading", errors.New("LOADING Redis is loading the dataset in memory"), true},
		{"script error", errors.New("ERR Error running script: bad argument"), false},
		{"wrong type", errors.New("WRONGTYPE Operation against a key holding the wrong kind of value"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, redisUnreachable(tc.err))
		})
	}
}

func TestUntilRedis(t *testing.T) {
	t.Parallel()
	down := fmt.Errorf("dial tcp 127.0.0.1:1: %w", syscall.ECONNREFUSED)
	for _, tc := range []struct {
		name      string
		errs      []error // returned by successive calls; then nil
		cancel    bool
		wantCalls int
		wantErr   error
	}{
		{"success at once", nil, false, 1, nil},
		{"retried until Redis answers", []error{down, down, down}, false, 4, nil},
		{"other errors are not retried", []error{errors.New("ERR wrong")}, false, 1, nil},
		{"stops when ctx ends", []error{down, down, down, down, down, down, down, down, down, down}, true, 1, down},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancel {
				cancel()
			}
			calls := 0
			began := time.Now()
			err := untilRedis(ctx, func() error {
				calls++
				if calls <= len(tc.errs) {
					return tc.errs[calls-1]
				}
				return nil
			})
			require.Equal(t, tc.wantCalls, calls)
			if tc.name == "other errors are not retried" {
				require.EqualError(t, err, "ERR wrong")
			} else {
				require.Equal(t, tc.wantErr, err)
			}
			require.Less(t, time.Since(began), 5*time.Second)
		})
	}
}
