package delivery

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/tasks"
)

// refusingCompleter answers every output write with out, counting them.
type refusingCompleter struct {
	*fakeCompleter
	out record.Outcome
	mu  sync.Mutex
	n   int
}

func (c *refusingCompleter) output(_ context.Context, _ record.Delivery, evs []record.Event) (record.Outcome, int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	return c.out, 0, nil
}

// TestOutputWriterStopsWhenRefused: once a write of a call's output is
// refused (the run is no longer live), the call's later events are not
// written; a writer that got no event writes nothing.
func TestOutputWriterStopsWhenRefused(t *testing.T) {
	t.Parallel()
	for _, out := range []record.Outcome{record.Stale, record.Ended, record.Canceled} {
		c := &refusingCompleter{fakeCompleter: &fakeCompleter{}, out: out}
		p := &Executor{rec: c}
		log := &taskLog{base: slog.New(slog.DiscardHandler), env: &tasks.Envelope{}}
		w := newOutput(context.Background(), p.rec, log, record.Delivery{ID: "x"})
		for range outputBatch { // a full batch: written at once
			w.emit(agent.EventProgress, json.RawMessage(`1`))
		}
		require.Eventually(t, func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.n == 1 }, 10*time.Second, time.Millisecond)
		for range 3 * outputBatch {
			w.emit(agent.EventProgress, json.RawMessage(`2`))
		}
		w.close()
		require.Equal(t, 1, c.n, "%s: no write after the refusal", out)
	}
	c := &refusingCompleter{fakeCompleter: &fakeCompleter{}, out: record.Applied}
	w := newOutput(context.Background(), c, &taskLog{base: slog.New(slog.DiscardHandler), env: &tasks.Envelope{}}, record.Delivery{ID: "y"})
	w.close()
	require.Zero(t, c.n)
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
		{"temporary replies are waited out", []error{
			replyErr("READONLY You can't write against a read only replica."),
			fmt.Errorf("tasks: transition: %w", replyErr("LOADING Redis is loading the dataset in memory")),
			replyErr("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."),
			replyErr("CLUSTERDOWN Hash slot not served"),
			replyErr("TRYAGAIN Multiple keys request during rehashing of slot"),
		}, false, 6, nil},
		{"other errors are not retried", []error{replyErr("ERR wrong")}, false, 1, nil},
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

// replyErr is a Redis error reply (it satisfies redis.Error).
type replyErr string

func (e replyErr) Error() string { return string(e) }
func (replyErr) RedisError()     {}
