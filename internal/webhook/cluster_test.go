package webhook

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
)

// TestDeliveryOnCluster: on a Redis Cluster (tasks on several shards) the
// deliveries are made; an outbox whose task missed the due set (the
// store's second step lost) is found by the repair and delivered.
func TestDeliveryOnCluster(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t)
	rdb := c.Client(t)
	s := setupT{rdb: rdb, store: record.NewStore(rdb), ctx: context.Background()}
	rcv := newReceiver(t, func(int) int { return http.StatusOK })
	secret, key := newSecret(t)
	d := New(rdb, s.store, Options{Hooks: map[string]Hook{"h": hook("h", rcv.srv.URL, key)}, RepairEvery: time.Millisecond})
	ids := []string{"a", "b", "c", "d", "e", "f"}
	for _, id := range ids {
		s.finish(t, id, []string{"h"}, record.Succeeded(record.Attempt{Attempt: 1}, nil))
	}
	until(t, d, func() bool { return len(rcv.requests()) == len(ids) })
	for _, r := range rcv.requests() {
		verify(t, secret, r)
	}

	// The second step lost: the outbox holds the event, the due set lacks the task.
	s.finish(t, "lost", []string{"h"}, record.Succeeded(record.Attempt{Attempt: 1}, nil))
	require.NoError(t, rdb.ZRem(s.ctx, rkeys.WebhooksDue(), "lost").Err())
	_, err := d.Tick(s.ctx)
	require.NoError(t, err)
	require.Len(t, rcv.requests(), len(ids), "not due: not delivered")
	made, err := d.Repair(s.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, made)
	until(t, d, func() bool { return len(rcv.requests()) == len(ids)+1 })
}

// TestDeliveryRetriedAfterARefusedConnection: a refused connection fails
// the attempt like a 5xx: retried, shown failing.
func TestDeliveryRetriedAfterARefusedConnection(t *testing.T) {
	s := setup(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	_, key := newSecret(t)
	d := New(s.rdb, s.store, Options{Hooks: map[string]Hook{"h": hook("h", "http://"+addr+"/x", key)},
		InitialBackoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond})
	s.finish(t, "r", []string{"h"}, record.Succeeded(record.Attempt{Attempt: 1}, nil))
	var st []Status
	until(t, d, func() bool {
		st, err = Statuses(s.ctx, s.rdb, d.o.Hooks)
		require.NoError(t, err)
		return st[0].Failing == 1 && st[0].LastError != ""
	})
	require.Contains(t, st[0].LastError, "refused")
	require.Equal(t, 1, st[0].Pending)
}
