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

// TestConformance runs every behaviour of the broker's scripts (cases) on
// each backend: miniredis (the embedded demo runs on it), a real
// redis-server, and a real Redis Cluster (every script's keys in one
// slot: the queue's hash tag). Each case drives an AsynqClient as asynq's
// server would, sending asynq's own scripts by their SHA-1, and the
// producers' and operators' scripts as agentq sends them.
//
// Standalone backends start a server per case; the Cluster (six nodes)
// is started once for the suite and each case has a queue of its own
// there, so no two cases share a key.
func TestConformance(t *testing.T) {
	t.Parallel()
	backends := []struct {
		name string
		open func(t *testing.T) redis.UniversalClient
	}{}
	for _, b := range redistest.Backends() {
		backends = append(backends, struct {
			name string
			open func(t *testing.T) redis.UniversalClient
		}{b.Name, func(t *testing.T) redis.UniversalClient { c, _ := b.New(t); return c }})
	}
	var cluster redis.UniversalClient
	backends = append(backends, struct {
		name string
		open func(t *testing.T) redis.UniversalClient
	}{"cluster", func(*testing.T) redis.UniversalClient { return cluster }})
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			if be.name == "cluster" {
				cluster = redistest.StartCluster(t).Client(t)
			}
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					c.run(t, newEnv(t, be.open(t), c.name, c.fc))
				})
			}
		})
	}
}

// env drives an AsynqClient on one queue as asynq's server would: it runs
// asynq's own scripts (by their SHA-1) through it.
type env struct {
	t   *testing.T
	ctx context.Context
	rdb redis.UniversalClient
	c   *broker.AsynqClient
	q   string
	n   int
}

func newEnv(t *testing.T, rdb redis.UniversalClient, name string, fc broker.FairConfig) *env {
	t.Helper()
	q := "q-" + strings.NewReplacer("/", "-", " ", "-", ",", "").Replace(name)
	w := broker.NewWaiter(rdb, []string{q}, 10*time.Millisecond, "w1")
	t.Cleanup(func() { w.Stop(context.Background()) })
	c := broker.NewAsynqClient(rdb, w, broker.NewDues(time.Second, time.Now), 1, nil)
	c.Fair = fc
	ctx := context.Background()
	if len(fc.Named) > 0 {
		require.NoError(t, broker.PublishFair(ctx, rdb, q, fc))
	}
	return &env{t: t, ctx: ctx, rdb: rdb, c: c, q: q}
}

// asynq is the prefix of asynq's keys of the queue.
func (b *env) asynq() string { return "asynq:{" + b.q + "}:" }

// enqueue puts n runs of lane on the queue, IDs "<tenant|->-<prio|n>-<i>".
func (b *env) enqueue(lane broker.Lane, n int) []string {
	b.t.Helper()
	var ids []string
	for range n {
		b.n++
		tn := lane.Tenant
		if tn == "" {
			tn = "-"
		}
		id := fmt.Sprintf("%s-%s-%d", tn, lane.Priority, b.n)
		tk := broker.AsynqTask{Type: "agentq:run", Payload: []byte("{}"), ID: id, Queue: b.q, MaxRetry: 1 << 30, Timeout: time.Hour}
		c := broker.RunCall(tk, lane, time.Now(), 0, false)
		require.NoError(b.t, c.Script.Run(b.ctx, b.rdb, c.Keys, c.Args...).Err())
		ids = append(ids, id)
	}
	return ids
}

// dequeue is one dequeue of asynq's processor: the run's ID, "" for none.
func (b *env) dequeue() string {
	b.t.Helper()
	keys := []string{broker.PendingKey(b.q), b.asynq() + "paused", broker.ActiveKey(b.q), b.asynq() + "lease"}
	err := b.c.EvalSha(b.ctx, broker.AsynqDequeueScript.Hash(), keys, time.Now().Add(time.Minute).Unix(), broker.TaskKeyPrefix(b.q)).Err()
	if err == redis.Nil {
		return ""
	}
	require.NoError(b.t, err)
	id, err := b.rdb.LIndex(b.ctx, broker.ActiveKey(b.q), 0).Result()
	require.NoError(b.t, err)
	return id
}

// doneKeys are asynq's done's keys for run id.
func (b *env) doneKeys(id string) []string {
	return []string{broker.ActiveKey(b.q), b.asynq() + "lease", broker.TaskKey(b.q, id), b.asynq() + "processed:2026-11-25", b.asynq() + "processed"}
}

// done is asynq's acknowledgement of run id.
func (b *env) done(id string) {
	b.t.Helper()
	require.NoError(b.t, b.c.EvalSha(b.ctx, broker.AsynqDoneScript.Hash(), b.doneKeys(id), id, time.Now().Add(time.Hour).Unix(), int64(1<<62)).Err())
}

// retry is asynq's retry of run id, due at (Unix s).
func (b *env) retry(id string, at int64) {
	b.t.Helper()
	msg, err := b.rdb.HGet(b.ctx, broker.TaskKey(b.q, id), "msg").Result()
	require.NoError(b.t, err)
	p := b.asynq()
	keys := []string{broker.TaskKey(b.q, id), p + "active", p + "lease", p + "retry", p + "processed:d", p + "failed:d", p + "processed", p + "failed"}
	require.NoError(b.t, b.c.EvalSha(b.ctx, broker.AsynqRetryScript.Hash(), keys, id, msg, at, time.Now().Add(time.Hour).Unix(), 1, int64(1<<62)).Err())
}

// requeue is asynq's put-back of run id at shutdown.
func (b *env) requeue(id string) {
	b.t.Helper()
	p := b.asynq()
	keys := []string{p + "active", p + "lease", p + "pending", broker.TaskKey(b.q, id)}
	require.NoError(b.t, b.c.EvalSha(b.ctx, broker.AsynqRequeueScript.Hash(), keys, id).Err())
}

// forward is asynq's forward of the queue's set ("scheduled" or "retry"):
// how many runs it moved.
func (b *env) forward(set string) int64 {
	b.t.Helper()
	p := b.asynq()
	moved, err := b.c.EvalSha(b.ctx, broker.AsynqForwardScript.Hash(), []string{p + set, p + "pending"},
		time.Now().Unix(), broker.TaskKeyPrefix(b.q), time.Now().UnixNano(), p+"g:").Int64()
	require.NoError(b.t, err)
	return moved
}

func (b *env) inflight(tenant string) int64 {
	n, _ := b.rdb.HGet(b.ctx, rkeys.FairInflight(b.q), tenant).Int64()
	return n
}

func tenantOf(id string) string { return strings.SplitN(id, "-", 2)[0] }

// cases are the broker's behaviours, each run on every backend.
var cases = []struct {
	name string
	fc   broker.FairConfig
	run  func(t *testing.T, b *env)
}{
	// a tenant that sends one task while another has a backlog in a lane
	// is served within the next two dispatches, not after the backlog.
	{"fair/new tenant overtakes a lane's backlog", broker.FairConfig{}, func(t *testing.T, b *env) {
		overtakes(t, b, broker.Lane{Tenant: "a"})
	}},
	// the same when the backlog is the default tenant's, in asynq's
	// pending list.
	{"fair/new tenant overtakes the pending list's backlog", broker.FairConfig{}, func(t *testing.T, b *env) {
		overtakes(t, b, broker.Lane{})
	}},
	// within a tenant, high runs go first and low runs last, whatever the
	// order they came in.
	{"fair/priorities of a tenant", broker.FairConfig{}, func(t *testing.T, b *env) { priorities(t, b, "a") }},
	// the same for the default tenant.
	{"fair/priorities of the default tenant", broker.FairConfig{}, func(t *testing.T, b *env) { priorities(t, b, "") }},
	// two backlogged tenants of weights 3 and 1 are served
	// 3:1 over every stretch of dispatches.
	{"fair/weights", broker.FairConfig{Named: map[string]broker.TenantSettings{"a": {Weight: 3}, "b": {Weight: 1}}}, func(t *testing.T, b *env) {
		b.enqueue(broker.Lane{Tenant: "a"}, 400)
		b.enqueue(broker.Lane{Tenant: "b"}, 400)
		counts := map[string]int{}
		for i := 1; i <= 200; i++ {
			counts[tenantOf(b.dequeue())]++
			if i%40 == 0 {
				require.InDelta(t, 3*i/4, counts["a"], 2, "after %d dispatches: %v", i, counts)
			}
		}
	}},
	// a tenant at its cap is not served (its runs wait in its
	// lane, taking no worker slot) while others are; acknowledging one of its
	// runs (done, retry or requeue) lets the next go and wakes a worker.
	{"fair/cap released by done, retry and requeue", broker.FairConfig{Named: map[string]broker.TenantSettings{"a": {Concurrency: 2}}}, func(t *testing.T, b *env) {
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
		require.EqualValues(t, 1, b.rdb.ZCard(b.ctx, rkeys.FairCapped(b.q)).Val())

		require.NoError(t, b.rdb.Del(b.ctx, rkeys.Wake(b.q)).Err())
		b.done(as[0])
		require.EqualValues(t, 1, b.rdb.LLen(b.ctx, rkeys.Wake(b.q)).Val(), "the release wakes a worker")
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
	}},
	// a retried run of a lane, forwarded when
	// due, goes back to its lane (not asynq's pending list) and keeps its
	// tenant's share.
	{"retry/forwarded back to its lane", broker.FairConfig{}, func(t *testing.T, b *env) {
		id := b.enqueue(broker.Lane{Tenant: "a", Priority: broker.High}, 1)[0]
		require.Equal(t, id, b.dequeue())
		b.retry(id, time.Now().Add(-time.Second).Unix())
		p := "asynq:{" + b.q + "}:"
		moved, err := b.c.EvalSha(b.ctx, broker.AsynqForwardScript.Hash(), []string{p + "retry", p + "pending"},
			time.Now().Unix(), broker.TaskKeyPrefix(b.q), time.Now().UnixNano(), p+"g:").Int64()
		require.NoError(t, err)
		require.EqualValues(t, 1, moved)
		require.Equal(t, []string{id}, b.rdb.LRange(b.ctx, rkeys.FairLane(b.q, "h", "a"), 0, -1).Val())
		require.Zero(t, b.rdb.LLen(b.ctx, broker.PendingKey(b.q)).Val())
		require.Equal(t, id, b.dequeue())
	}},
	// a paused queue hands out nothing, lanes included.
	{"dequeue/paused queue", broker.FairConfig{}, func(t *testing.T, b *env) {
		b.enqueue(broker.Lane{Tenant: "a"}, 1)
		b.enqueue(broker.Lane{}, 1)
		require.NoError(t, b.rdb.Set(b.ctx, "asynq:{"+b.q+"}:paused", "1", 0).Err())
		require.Equal(t, "", b.dequeue())
		require.NoError(t, b.rdb.Del(b.ctx, "asynq:{"+b.q+"}:paused").Err())
		require.NotEqual(t, "", b.dequeue())
	}},
	// the repair puts back a tenant whose ready-set entry was
	// lost and recounts in-flight counts from asynq's active list.
	{"repair/ready set and in-flight counts", broker.FairConfig{Named: map[string]broker.TenantSettings{"a": {Concurrency: 1}}}, func(t *testing.T, b *env) {
		b.enqueue(broker.Lane{Tenant: "a"}, 3)
		b.enqueue(broker.Lane{Tenant: "b"}, 3)
		require.Equal(t, "a", tenantOf(b.dequeue()))
		require.NoError(t, b.rdb.Del(b.ctx, rkeys.FairReady(b.q)).Err())
		require.NoError(t, b.rdb.HSet(b.ctx, rkeys.FairInflight(b.q), "a", 7).Err())
		require.Equal(t, "", b.dequeue(), "with its ready set lost, nothing is handed out")
		readied, fixed, err := broker.RepairFair(b.ctx, b.rdb, b.q, b.c.Fair)
		require.NoError(t, err)
		require.EqualValues(t, 1, fixed)
		require.EqualValues(t, 2, readied)
		require.EqualValues(t, 1, b.inflight("a"))
		require.Equal(t, "b", tenantOf(b.dequeue()), "a is at its cap of 1")
	}},
	// the default tenant's runs in asynq's
	// pending list take their share beside backlogged lanes (weights from
	// defaults.tenant), neither starving nor starved.
	{"fair/default tenant shares", broker.FairConfig{Named: map[string]broker.TenantSettings{"a": {Weight: 2}}, Default: broker.TenantSettings{Weight: 1}}, func(t *testing.T, b *env) {
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
	}},
	// a canceled run is taken out of its lane (the
	// default lane's are left to asynq's inspector), and a deferred run woken
	// early goes to its lane.
	{"lane/remove and run now", broker.FairConfig{}, func(t *testing.T, b *env) {
		id := b.enqueue(broker.Lane{Tenant: "a", Priority: broker.Low}, 1)[0]
		plain := b.enqueue(broker.Lane{}, 1)[0]
		ok, err := broker.RemoveFromLane(b.ctx, b.rdb, b.q, id)
		require.NoError(t, err)
		require.True(t, ok)
		require.Zero(t, b.rdb.Exists(b.ctx, broker.TaskKey(b.q, id), rkeys.FairLane(b.q, "l", "a")).Val())
		ok, err = broker.RemoveFromLane(b.ctx, b.rdb, b.q, plain)
		require.NoError(t, err)
		require.False(t, ok, "the default lane's runs are asynq's")
		require.NoError(t, b.rdb.Del(b.ctx, broker.PendingKey(b.q)).Err())

		id = b.enqueue(broker.Lane{Tenant: "a", Priority: broker.High}, 1)[0]
		require.Equal(t, id, b.dequeue())
		b.retry(id, time.Now().Add(time.Hour).Unix())
		ok, err = broker.RunNow(b.ctx, b.rdb, b.q, broker.RetryKey(b.q), id, time.Now().UnixNano())
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, []string{id}, b.rdb.LRange(b.ctx, rkeys.FairLane(b.q, "h", "a"), 0, -1).Val())
		require.Equal(t, id, b.dequeue())
	}},
	// a run pushed onto a lane that already has runs
	// does not touch the ready set or the registry (its tenant is in one of
	// the sets already): a capped tenant stays capped, at its pass, and a
	// tenant alone in the ready set keeps its pass until another joins; a
	// tenant that joins is still served next and the two then alternate.
	{"lane/join once per lane", broker.FairConfig{Named: map[string]broker.TenantSettings{"c": {Concurrency: 1}}}, func(t *testing.T, b *env) {
		b.enqueue(broker.Lane{Tenant: "a"}, 3)
		require.Equal(t, []string{"a"}, b.rdb.SMembers(b.ctx, rkeys.FairTenants(b.q)).Val())
		require.Equal(t, "a", tenantOf(b.dequeue()))
		require.Equal(t, "a", tenantOf(b.dequeue()))
		require.Zero(t, b.rdb.ZScore(b.ctx, rkeys.FairReady(b.q), "a").Val(), "alone, a keeps its pass")
		b.enqueue(broker.Lane{Tenant: "a"}, 3)
		require.Zero(t, b.rdb.ZScore(b.ctx, rkeys.FairReady(b.q), "a").Val())

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
		pass, err := b.rdb.ZScore(b.ctx, rkeys.FairCapped(b.q), "c").Result()
		require.NoError(t, err, "c waits at its cap")
		b.enqueue(broker.Lane{Tenant: "c"}, 1)
		require.Equal(t, pass, b.rdb.ZScore(b.ctx, rkeys.FairCapped(b.q), "c").Val(), "a push onto c's lane leaves it capped, at its pass")
		require.Equal(t, redis.Nil, b.rdb.ZScore(b.ctx, rkeys.FairReady(b.q), "c").Err())
		require.ElementsMatch(t, []string{"a", "b", "c"}, b.rdb.SMembers(b.ctx, rkeys.FairTenants(b.q)).Val())
	}},
	// the wake list never holds more than WakeCap tokens.
	{"wake/tokens capped", broker.FairConfig{}, func(t *testing.T, b *env) {
		require.NoError(t, broker.PushWake(b.ctx, b.rdb, b.q, broker.WakeCap-1))
		require.NoError(t, broker.PushWake(b.ctx, b.rdb, b.q, 10))
		require.NoError(t, broker.PushWake(b.ctx, b.rdb, b.q, 0))
		require.EqualValues(t, broker.WakeCap, b.rdb.LLen(b.ctx, rkeys.Wake(b.q)).Val())
	}},
	// a run of the default lane goes on asynq's pending list with a wake
	// token, a lane's run in its lane with its tenant ready; an ID that
	// exists is refused.
	{"run/pending, in its lane, with a token", broker.FairConfig{}, func(t *testing.T, b *env) {
		plain := b.enqueue(broker.Lane{}, 1)[0]
		lane := b.enqueue(broker.Lane{Tenant: "acme", Priority: broker.Low}, 1)[0]
		require.Equal(t, []string{plain}, b.rdb.LRange(b.ctx, broker.PendingKey(b.q), 0, -1).Val())
		require.Equal(t, []string{lane}, b.rdb.LRange(b.ctx, rkeys.FairLane(b.q, "l", "acme"), 0, -1).Val())
		require.Equal(t, []string{"acme"}, b.rdb.ZRange(b.ctx, rkeys.FairReady(b.q), 0, -1).Val())
		require.EqualValues(t, 2, b.rdb.LLen(b.ctx, rkeys.Wake(b.q)).Val())
		tk := broker.AsynqTask{Type: "agentq:run", ID: plain, Queue: b.q}
		c := broker.RunCall(tk, broker.Lane{}, time.Now(), 0, false)
		n, err := c.Script.Run(b.ctx, b.rdb, c.Keys, c.Args...).Int()
		require.NoError(t, err)
		require.Zero(t, n, "the ID exists")
	}},
	// a scheduled run waits in asynq's scheduled set, naming its lane; its
	// forward, when due, puts it in its lane with a wake token.
	{"forward/scheduled run to its lane", broker.FairConfig{}, func(t *testing.T, b *env) {
		tk := broker.AsynqTask{Type: "agentq:run", ID: "s-1", Queue: b.q}
		c := broker.RunCall(tk, broker.Lane{Tenant: "a", Priority: broker.High}, time.Now().Add(-2*time.Second), time.Second, false)
		require.NoError(t, c.Script.Run(b.ctx, b.rdb, c.Keys, c.Args...).Err())
		require.EqualValues(t, 1, b.rdb.ZCard(b.ctx, broker.ScheduledKey(b.q)).Val())
		require.EqualValues(t, 1, b.forward("scheduled"))
		require.Equal(t, []string{"s-1"}, b.rdb.LRange(b.ctx, rkeys.FairLane(b.q, "h", "a"), 0, -1).Val())
		require.EqualValues(t, 1, b.rdb.LLen(b.ctx, rkeys.Wake(b.q)).Val())
		require.Equal(t, "s-1", b.dequeue())
		b.done("s-1")
		require.Zero(t, b.rdb.Exists(b.ctx, broker.TaskKey(b.q, "s-1")).Val())
	}},
	// asynq's scripts are recognised when sent by EVAL too (after a
	// NOSCRIPT): the dequeue serves the lanes.
	{"dequeue/recognised by EVAL", broker.FairConfig{}, func(t *testing.T, b *env) {
		id := b.enqueue(broker.Lane{Tenant: "a"}, 1)[0]
		keys := []string{broker.PendingKey(b.q), b.asynq() + "paused", broker.ActiveKey(b.q), b.asynq() + "lease"}
		require.NoError(t, b.c.Eval(b.ctx, broker.DequeueSource, keys, time.Now().Add(time.Minute).Unix(), broker.TaskKeyPrefix(b.q)).Err())
		require.Equal(t, []string{id}, b.rdb.LRange(b.ctx, broker.ActiveKey(b.q), 0, -1).Val())
	}},
	// asynq's done of a delivery no longer active answers NOT FOUND and
	// releases nothing.
	{"done/not active", broker.FairConfig{Named: map[string]broker.TenantSettings{"a": {Concurrency: 1}}}, func(t *testing.T, b *env) {
		id := b.enqueue(broker.Lane{Tenant: "a"}, 1)[0]
		require.Equal(t, id, b.dequeue())
		require.NoError(t, b.rdb.LRem(b.ctx, broker.ActiveKey(b.q), 0, id).Err())
		err := b.c.EvalSha(b.ctx, broker.AsynqDoneScript.Hash(), b.doneKeys(id), id, time.Now().Add(time.Hour).Unix(), int64(1<<62)).Err()
		require.EqualError(t, err, "NOT FOUND")
		require.EqualValues(t, 1, b.inflight("a"))
	}},
}

func overtakes(t *testing.T, b *env, backlog broker.Lane) {
	b.enqueue(backlog, 500)
	for range 10 {
		b.dequeue()
	}
	want := b.enqueue(broker.Lane{Tenant: "b"}, 1)[0]
	got := []string{b.dequeue(), b.dequeue()}
	require.Contains(t, got, want)
}

func priorities(t *testing.T, b *env, tenant string) {
	normal := b.enqueue(broker.Lane{Tenant: tenant}, 3)
	low := b.enqueue(broker.Lane{Tenant: tenant, Priority: broker.Low}, 1)
	high := b.enqueue(broker.Lane{Tenant: tenant, Priority: broker.High}, 2)
	var got []string
	for range 6 {
		got = append(got, b.dequeue())
	}
	require.Equal(t, append(append(high, normal...), low...), got)
}
