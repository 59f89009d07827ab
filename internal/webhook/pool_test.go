package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/rkeys"
)

// TestHangingReceiverDoesNotDelayAnother: 128 events to a receiver that
// hangs take its share of the pool (its concurrency) and no more: each of
// the events to a healthy receiver beside it arrives within 1 s of being
// recorded, while the hanging receiver's slots are full and again after
// its first attempts timed out and were retried (one worker).
func TestHangingReceiverDoesNotDelayAnother(t *testing.T) {
	s := setup(t)
	var hung atomic.Int64
	unblock := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		hung.Add(1)
		select {
		case <-req.Context().Done():
		case <-unblock:
		}
	}))
	t.Cleanup(hang.Close)
	t.Cleanup(func() { close(unblock) })
	var mu sync.Mutex
	arrived := map[string]time.Time{}
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		at := time.Now()
		b, _ := io.ReadAll(req.Body)
		var body struct {
			Data struct {
				Task struct{ ID string } `json:"task"`
			} `json:"data"`
		}
		_ = json.Unmarshal(b, &body)
		mu.Lock()
		if _, seen := arrived[body.Data.Task.ID]; !seen {
			arrived[body.Data.Task.ID] = at
		}
		mu.Unlock()
	}))
	t.Cleanup(ok.Close)
	_, key := newSecret(t)
	slow := hook("hang", hang.URL, key)
	slow.Timeout = 3 * time.Second
	d := New(s.rdb, s.store, Options{Hooks: map[string]Hook{"hang": slow, "ok": hook("ok", ok.URL, key)}})
	ctx, cancel := context.WithCancel(s.ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	for i := range 128 {
		s.finish(t, fmt.Sprintf("hang-%03d", i), []string{"hang"}, record.Succeeded(record.Attempt{Attempt: 1}, nil))
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			require.True(t, time.Now().Before(deadline), "%s: not in time", what)
			time.Sleep(10 * time.Millisecond)
		}
	}
	wave := func(name string) {
		t.Helper()
		recorded := map[string]time.Time{}
		for i := range 5 {
			id := fmt.Sprintf("%s-%d", name, i)
			recorded[id] = time.Now()
			s.finish(t, id, []string{"ok"}, record.Succeeded(record.Attempt{Attempt: 1}, nil))
		}
		waitFor(name+": every healthy delivery", func() bool {
			mu.Lock()
			defer mu.Unlock()
			for id := range recorded {
				if _, seen := arrived[id]; !seen {
					return false
				}
			}
			return true
		})
		mu.Lock()
		defer mu.Unlock()
		for id, at := range recorded {
			require.Less(t, arrived[id].Sub(at), time.Second, "%s: the healthy receiver's delivery of %s", name, id)
		}
	}
	waitFor("the hanging receiver's slots taken", func() bool { return hung.Load() >= DefaultHookConcurrency })
	wave("ok-a")
	require.Less(t, hung.Load(), int64(2*DefaultHookConcurrency), "the hanging receiver holds its share of the pool, no more")
	// Its first attempts time out (3 s) and free their slots: the next of
	// its tasks take them, and the healthy receiver is still not held up.
	waitFor("the hanging receiver's next attempts", func() bool { return hung.Load() >= 2*DefaultHookConcurrency })
	wave("ok-b")
}

// TestDueTasksServedInEventOrder: a task is due from its event's time, so
// due tasks are claimed in the order of their events, not of their IDs (a
// late-sorting ID is not starved under a backlog).
func TestDueTasksServedInEventOrder(t *testing.T) {
	s := setup(t)
	order := []string{"z-first", "m-second", "a-third"}
	for _, id := range order {
		s.finish(t, id, []string{"h"}, record.Succeeded(record.Attempt{Attempt: 1}, nil))
		score, err := s.rdb.ZScore(s.ctx, rkeys.WebhooksDue(), id).Result()
		require.NoError(t, err)
		// The next event is recorded a millisecond later at least.
		deadline := time.Now().Add(5 * time.Second)
		for {
			now, err := s.rdb.Time(s.ctx).Result()
			require.NoError(t, err)
			if float64(now.UnixMilli()) > score {
				break
			}
			require.True(t, time.Now().Before(deadline), "the server's clock did not move")
		}
	}
	var got []string
	for range order {
		v, err := claimScript.Run(s.ctx, s.rdb, []string{rkeys.WebhooksDue(), rkeys.WebhooksLeased()},
			time.Now().UnixMilli(), 60000, 1).Slice()
		require.NoError(t, err)
		require.Len(t, v, 2)
		got = append(got, v[1].(string))
	}
	require.Equal(t, order, got)
}
