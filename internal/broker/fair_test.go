package broker_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
)

// fairQ is the queue of the fair dispatch tests.
const fairQ = "q"

// fairBundle drives an AsynqClient as asynq's server would: it runs
// asynq's own scripts (by their SHA-1) through it, against a real Redis.
type fairBundle struct {
	t   *testing.T
	ctx context.Context
	rdb *redis.Client
	c   *broker.AsynqClient
	n   int
}

func setupFair(t *testing.T, fc broker.FairConfig) *fairBundle {
	t.Helper()
	rdb := redistest.Start(t).Client()
	t.Cleanup(func() { _ = rdb.Close() })
	w := broker.NewWaiter(rdb, []string{fairQ}, 10*time.Millisecond, "w1")
	c := broker.NewAsynqClient(rdb, w, broker.NewDues(time.Second, time.Now), 1, nil)
	c.Fair = fc
	ctx := context.Background()
	for name := range fc.Named {
		_ = name
		require.NoError(t, broker.PublishFair(ctx, rdb, fairQ, fc))
		break
	}
	return &fairBundle{t: t, ctx: ctx, rdb: rdb, c: c}
}

// enqueue puts n runs of lane on the queue, IDs "<tenant|->-<prio|n>-<i>".
func (b *fairBundle) enqueue(lane broker.Lane, n int) []string {
	b.t.Helper()
	var ids []string
	for range n {
		b.n++
		tn := lane.Tenant
		if tn == "" {
			tn = "-"
		}
		id := fmt.Sprintf("%s-%s-%d", tn, lane.Priority, b.n)
		tk := broker.AsynqTask{Type: "agentq:run", Payload: []byte("{}"), ID: id, Queue: fairQ, MaxRetry: 1 << 30, Timeout: time.Hour}
		c := broker.RunCall(tk, lane, time.Now(), 0, false)
		require.NoError(b.t, c.Script.Run(b.ctx, b.rdb, c.Keys, c.Args...).Err())
		ids = append(ids, id)
	}
	return ids
}

// dequeue is one dequeue of asynq's processor: the run's ID, "" for none.
func (b *fairBundle) dequeue() string {
	b.t.Helper()
	keys := []string{broker.PendingKey(fairQ), "asynq:{" + fairQ + "}:paused", broker.ActiveKey(fairQ), "asynq:{" + fairQ + "}:lease"}
	err := b.c.EvalSha(b.ctx, broker.AsynqDequeueScript.Hash(), keys, time.Now().Add(time.Minute).Unix(), broker.TaskKeyPrefix(fairQ)).Err()
	if err == redis.Nil {
		return ""
	}
	require.NoError(b.t, err)
	id, err := b.rdb.LIndex(b.ctx, broker.ActiveKey(fairQ), 0).Result()
	require.NoError(b.t, err)
	return id
}

// done is asynq's acknowledgement of run id.
func (b *fairBundle) done(id string) {
	b.t.Helper()
	keys := []string{broker.ActiveKey(fairQ), "asynq:{" + fairQ + "}:lease", broker.TaskKey(fairQ, id),
		"asynq:{" + fairQ + "}:processed:2026-11-25", "asynq:{" + fairQ + "}:processed"}
	require.NoError(b.t, b.c.EvalSha(b.ctx, broker.AsynqDoneScript.Hash(), keys, id, time.Now().Add(time.Hour).Unix(), int64(1<<62)).Err())
}

// retry is asynq's retry of run id, due at (Unix s).
func (b *fairBundle) retry(id string, at int64) {
	b.t.Helper()
	msg, err := b.rdb.HGet(b.ctx, broker.TaskKey(fairQ, id), "msg").Result()
	require.NoError(b.t, err)
	p := "asynq:{" + fairQ + "}:"
	keys := []string{broker.TaskKey(fairQ, id), p + "active", p + "lease", p + "retry", p + "processed:d", p + "failed:d", p + "processed", p + "failed"}
	require.NoError(b.t, b.c.EvalSha(b.ctx, broker.AsynqRetryScript.Hash(), keys, id, msg, at, time.Now().Add(time.Hour).Unix(), 1, int64(1<<62)).Err())
}

// requeue is asynq's put-back of run id at shutdown.
func (b *fairBundle) requeue(id string) {
	b.t.Helper()
	p := "asynq:{" + fairQ + "}:"
	keys := []string{p + "active", p + "lease", p + "pending", broker.TaskKey(fairQ, id)}
	require.NoError(b.t, b.c.EvalSha(b.ctx, broker.AsynqRequeueScript.Hash(), keys, id).Err())
}

func (b *fairBundle) inflight(tenant string) int64 {
	n, _ := b.rdb.HGet(b.ctx, rkeys.FairInflight(fairQ), tenant).Int64()
	return n
}

func tenantOf(id string) string { return strings.SplitN(id, "-", 2)[0] }

// TestFairNewTenantOvertakesBacklog: a tenant that sends one task while
// another has a backlog (in a lane, or the default tenant's in asynq's
// pending list) is served within the next two dispatches, not after the
// backlog.
func TestFairNewTenantOvertakesBacklog(t *testing.T) {
	t.Parallel()
	for _, backlog := range []broker.Lane{{Tenant: "a"}, {}} {
		b := setupFair(t, broker.FairConfig{})
		b.enqueue(backlog, 500)
		for range 10 {
			b.dequeue()
		}
		want := b.enqueue(broker.Lane{Tenant: "b"}, 1)[0]
		got := []string{b.dequeue(), b.dequeue()}
		require.Contains(t, got, want, "backlog %+v", backlog)
	}
}

// TestFairWeights: two backlogged tenants of weights 3 and 1 are served
// 3:1 over every stretch of dispatches.
func TestFairWeights(t *testing.T) {
	t.Parallel()
	b := setupFair(t, broker.FairConfig{Named: map[string]broker.TenantSettings{"a": {Weight: 3}, "b": {Weight: 1}}})
	b.enqueue(broker.Lane{Tenant: "a"}, 400)
	b.enqueue(broker.Lane{Tenant: "b"}, 400)
	counts := map[string]int{}
	for i := 1; i <= 200; i++ {
		counts[tenantOf(b.dequeue())]++
		if i%40 == 0 {
			require.InDelta(t, 3*i/4, counts["a"], 2, "after %d dispatches: %v", i, counts)
		}
	}
}

// TestFairCap: a tenant at its cap is not served (its runs wait in its
// lane, taking no worker slot) while others are; acknowledging one of its
// runs (done, retry or requeue) lets the next go and wakes a worker.
func TestFairCap(t *testing.T) {
	t.Parallel()
	b := setupFair(t, broker.FairConfig{Named: map[string]broker.TenantSettings{"a": {Concurrency: 2}}})
	b.enqueue(broker.Lane{Tenant: "a"}, 10)
	b.enqueue(broker.Lane{Tenant: "b"}, 5)
	counts := map[string]int{}
	var as []string
	for range 7 {
		id := b.dequeue()
		counts[tenantOf(id)]++
		if tenantOf(id) == "a" {
			as = append(as, id)
		}
	}
	require.Equal(t, map[string]int{"a": 2, "b": 5}, counts)
	require.Equal(t, "", b.dequeue(), "a is at its cap and b has nothing left")
	require.EqualValues(t, 2, b.inflight("a"))
	require.EqualValues(t, 1, b.rdb.ZCard(b.ctx, rkeys.FairCapped(fairQ)).Val())

	require.NoError(t, b.rdb.Del(b.ctx, rkeys.Wake(fairQ)).Err())
	b.done(as[0])
	require.EqualValues(t, 1, b.rdb.LLen(b.ctx, rkeys.Wake(fairQ)).Val(), "the release wakes a worker")
	next := b.dequeue()
	require.Equal(t, "a", tenantOf(next))
	require.Equal(t, "", b.dequeue())

	b.retry(as[1], time.Now().Add(time.Hour).Unix())
	require.Equal(t, "a", tenantOf(b.dequeue()), "a retry releases the run's slot")
	require.EqualValues(t, 2, b.inflight("a"))
	b.requeue(next)
	require.EqualValues(t, 1, b.inflight("a"))
	require.Equal(t, next, b.dequeue(), "a requeued run goes back to the front of its lane")
	require.EqualValues(t, 2, b.inflight("a"))
}

// TestFairPriority: within a tenant, high runs go first and low runs
// last, whatever the order they came in; the default tenant too.
func TestFairPriority(t *testing.T) {
	t.Parallel()
	for _, tenant := range []string{"a", ""} {
		b := setupFair(t, broker.FairConfig{})
		normal := b.enqueue(broker.Lane{Tenant: tenant}, 3)
		low := b.enqueue(broker.Lane{Tenant: tenant, Priority: broker.Low}, 1)
		high := b.enqueue(broker.Lane{Tenant: tenant, Priority: broker.High}, 2)
		var got []string
		for range 6 {
			got = append(got, b.dequeue())
		}
		require.Equal(t, append(append(high, normal...), low...), got, "tenant %q", tenant)
	}
}

// TestFairRetryReturnsToLane: a retried run of a lane, forwarded when
// due, goes back to its lane (not asynq's pending list) and keeps its
// tenant's share.
func TestFairRetryReturnsToLane(t *testing.T) {
	t.Parallel()
	b := setupFair(t, broker.FairConfig{})
	id := b.enqueue(broker.Lane{Tenant: "a", Priority: broker.High}, 1)[0]
	require.Equal(t, id, b.dequeue())
	b.retry(id, time.Now().Add(-time.Second).Unix())
	p := "asynq:{" + fairQ + "}:"
	moved, err := b.c.EvalSha(b.ctx, broker.AsynqForwardScript.Hash(), []string{p + "retry", p + "pending"},
		time.Now().Unix(), broker.TaskKeyPrefix(fairQ), time.Now().UnixNano(), p+"g:").Int64()
	require.NoError(t, err)
	require.EqualValues(t, 1, moved)
	require.Equal(t, []string{id}, b.rdb.LRange(b.ctx, rkeys.FairLane(fairQ, "h", "a"), 0, -1).Val())
	require.Zero(t, b.rdb.LLen(b.ctx, broker.PendingKey(fairQ)).Val())
	require.Equal(t, id, b.dequeue())
}

// TestFairPausedQueue: a paused queue hands out nothing, lanes included.
func TestFairPausedQueue(t *testing.T) {
	t.Parallel()
	b := setupFair(t, broker.FairConfig{})
	b.enqueue(broker.Lane{Tenant: "a"}, 1)
	b.enqueue(broker.Lane{}, 1)
	require.NoError(t, b.rdb.Set(b.ctx, "asynq:{"+fairQ+"}:paused", "1", 0).Err())
	require.Equal(t, "", b.dequeue())
	require.NoError(t, b.rdb.Del(b.ctx, "asynq:{"+fairQ+"}:paused").Err())
	require.NotEqual(t, "", b.dequeue())
}

// TestFairRepair: the repair puts back a tenant whose ready-set entry was
// lost and recounts in-flight counts from asynq's active list.
func TestFairRepair(t *testing.T) {
	t.Parallel()
	fc := broker.FairConfig{Named: map[string]broker.TenantSettings{"a": {Concurrency: 1}}}
	b := setupFair(t, fc)
	b.enqueue(broker.Lane{Tenant: "a"}, 3)
	b.enqueue(broker.Lane{Tenant: "b"}, 3)
	require.Equal(t, "a", tenantOf(b.dequeue()))
	require.NoError(t, b.rdb.Del(b.ctx, rkeys.FairReady(fairQ)).Err())
	require.NoError(t, b.rdb.HSet(b.ctx, rkeys.FairInflight(fairQ), "a", 7).Err())
	require.Equal(t, "", b.dequeue(), "with its ready set lost, nothing is handed out")
	readied, fixed, err := broker.RepairFair(b.ctx, b.rdb, fairQ, fc)
	require.NoError(t, err)
	require.EqualValues(t, 1, fixed)
	require.EqualValues(t, 2, readied)
	require.EqualValues(t, 1, b.inflight("a"))
	require.Equal(t, "b", tenantOf(b.dequeue()), "a is at its cap of 1")
}

// TestFairDefaultTenantShares: the default tenant's runs in asynq's
// pending list take their share beside backlogged lanes (weights from
// defaults.tenant), neither starving nor starved.
func TestFairDefaultTenantShares(t *testing.T) {
	t.Parallel()
	b := setupFair(t, broker.FairConfig{Named: map[string]broker.TenantSettings{"a": {Weight: 2}}, Default: broker.TenantSettings{Weight: 1}})
	b.enqueue(broker.Lane{}, 300)
	b.enqueue(broker.Lane{Tenant: "a"}, 300)
	b.enqueue(broker.Lane{Tenant: "b"}, 300)
	counts := map[string]int{}
	for range 200 {
		counts[tenantOf(b.dequeue())]++
	}
	require.InDelta(t, 50, counts[""], 2, "%v", counts) // the default tenant
	require.InDelta(t, 100, counts["a"], 2, "%v", counts)
	require.InDelta(t, 50, counts["b"], 2, "%v", counts)
}

// TestFairRemoveAndRunNow: a canceled run is taken out of its lane (the
// default lane's are left to asynq's inspector), and a deferred run woken
// early goes to its lane.
func TestFairRemoveAndRunNow(t *testing.T) {
	t.Parallel()
	b := setupFair(t, broker.FairConfig{})
	id := b.enqueue(broker.Lane{Tenant: "a", Priority: broker.Low}, 1)[0]
	plain := b.enqueue(broker.Lane{}, 1)[0]
	ok, err := broker.RemoveFromLane(b.ctx, b.rdb, fairQ, id)
	require.NoError(t, err)
	require.True(t, ok)
	require.Zero(t, b.rdb.Exists(b.ctx, broker.TaskKey(fairQ, id), rkeys.FairLane(fairQ, "l", "a")).Val())
	ok, err = broker.RemoveFromLane(b.ctx, b.rdb, fairQ, plain)
	require.NoError(t, err)
	require.False(t, ok, "the default lane's runs are asynq's")
	require.NoError(t, b.rdb.Del(b.ctx, broker.PendingKey(fairQ)).Err())

	id = b.enqueue(broker.Lane{Tenant: "a", Priority: broker.High}, 1)[0]
	require.Equal(t, id, b.dequeue())
	b.retry(id, time.Now().Add(time.Hour).Unix())
	ok, err = broker.RunNow(b.ctx, b.rdb, fairQ, broker.RetryKey(fairQ), id, time.Now().UnixNano())
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, []string{id}, b.rdb.LRange(b.ctx, rkeys.FairLane(fairQ, "h", "a"), 0, -1).Val())
	require.Equal(t, id, b.dequeue())
}

// TestFairJoinOncePerLane: a run pushed onto a lane that already has runs
// does not touch the ready set or the registry (its tenant is in one of
// the sets already): a capped tenant stays capped, at its pass, and a
// tenant alone in the ready set keeps its pass until another joins; a
// tenant that joins is still served next and the two then alternate.
func TestFairJoinOncePerLane(t *testing.T) {
	t.Parallel()
	b := setupFair(t, broker.FairConfig{Named: map[string]broker.TenantSettings{"c": {Concurrency: 1}}})
	b.enqueue(broker.Lane{Tenant: "a"}, 3)
	require.Equal(t, []string{"a"}, b.rdb.SMembers(b.ctx, rkeys.FairTenants(fairQ)).Val())
	require.Equal(t, "a", tenantOf(b.dequeue()))
	require.Equal(t, "a", tenantOf(b.dequeue()))
	require.Zero(t, b.rdb.ZScore(b.ctx, rkeys.FairReady(fairQ), "a").Val(), "alone, a keeps its pass")
	b.enqueue(broker.Lane{Tenant: "a"}, 3)
	require.Zero(t, b.rdb.ZScore(b.ctx, rkeys.FairReady(fairQ), "a").Val())

	b.enqueue(broker.Lane{Tenant: "b"}, 4)
	var got []string
	for range 6 {
		got = append(got, tenantOf(b.dequeue()))
	}
	require.Contains(t, [][]string{{"a", "b", "a", "b", "a", "b"}, {"b", "a", "b", "a", "b", "a"}}, got, "joined, then alternating")

	b.enqueue(broker.Lane{Tenant: "c"}, 2)
	require.Equal(t, "c", tenantOf(b.dequeue()), "a tenant that joins is served next")
	for id := b.dequeue(); id != ""; id = b.dequeue() {
		require.NotEqual(t, "c", tenantOf(id))
	}
	pass, err := b.rdb.ZScore(b.ctx, rkeys.FairCapped(fairQ), "c").Result()
	require.NoError(t, err, "c waits at its cap")
	b.enqueue(broker.Lane{Tenant: "c"}, 1)
	require.Equal(t, pass, b.rdb.ZScore(b.ctx, rkeys.FairCapped(fairQ), "c").Val(), "a push onto c's lane leaves it capped, at its pass")
	require.Equal(t, redis.Nil, b.rdb.ZScore(b.ctx, rkeys.FairReady(fairQ), "c").Err())
	require.ElementsMatch(t, []string{"a", "b", "c"}, b.rdb.SMembers(b.ctx, rkeys.FairTenants(fairQ)).Val())
}
