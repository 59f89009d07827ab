package registry_test

import (
	"context"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/buildinfo"
	"github.com/agentq/agentq/internal/inspect"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/registry"
	"github.com/agentq/agentq/internal/rkeys"
)

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type hbSetup struct {
	rdb   *redis.Client
	clock *fakeClock
	ctx   context.Context
}

func setupHeartbeat(t *testing.T) hbSetup {
	t.Helper()
	srv := redistest.Start(t)
	return hbSetup{rdb: srv.Client(), clock: &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}, ctx: context.Background()}
}

func (s hbSetup) heartbeat() *registry.Heartbeat {
	return registry.NewHeartbeat(s.rdb, map[string]int{"default": 1, "slow": 2}, 4, "", nil, s.clock.now, time.Hour)
}

func (s hbSetup) list(t *testing.T) []inspect.WorkerInfo {
	t.Helper()
	ws, err := inspect.Workers(s.ctx, s.rdb, s.clock.now())
	require.NoError(t, err)
	return ws
}

// TestWorkerRegistryAliveThenGone: a worker's heartbeat lists it alive
// with its tasks in flight; once it stops beating (no Stop: a SIGKILL)
// it is gone after inspect.GoneAfter, with the tasks asynq still holds
// leased shown orphaned, their lease expiry and recovery window; a task
// no longer leased is not orphaned.
func TestWorkerRegistryAliveThenGone(t *testing.T) {
	t.Parallel()
	s := setupHeartbeat(t)
	hb := s.heartbeat()
	doneA := hb.Track("task-a", "task-a", "llm", "slow")
	s.clock.add(2 * time.Second)
	hb.Track("run-b", "task-b", "tool", "default")
	doneC := hb.Track("task-c", "task-c", "tool", "default")
	doneC()
	s.clock.add(time.Second)
	require.NoError(t, hb.Beat(s.ctx))

	ws := s.list(t)
	require.Len(t, ws, 1)
	w := ws[0]
	require.Equal(t, hb.ID(), w.ID)
	require.Equal(t, inspect.WorkerAlive, w.State)
	require.Equal(t, 4, w.Concurrency)
	require.Equal(t, map[string]int{"default": 1, "slow": 2}, w.Queues)
	require.NotZero(t, w.PID)
	require.Equal(t, buildinfo.Version(), w.Version, "agentq's version, not devel (#39 item 3)")
	require.Len(t, w.Tasks, 2, "task-c ended")
	require.Equal(t, "task-a", w.Tasks[0].ID, "oldest first")
	require.Equal(t, int64(3000), w.Tasks[0].RunningMS)
	require.Equal(t, "task-b", w.Tasks[1].ID)
	require.Equal(t, "run-b", w.Tasks[1].Delivery)
	require.False(t, w.Tasks[0].Orphaned, "a live worker's tasks are not orphaned")
	_ = doneA

	// asynq holds task-a leased (lease 30 s after the last heartbeat);
	// run-b is no longer leased (recovered, or ended).
	lease := s.clock.now().Add(30 * time.Second).Truncate(time.Second)
	require.NoError(t, s.rdb.ZAdd(s.ctx, broker.LeaseKey("slow"), redis.Z{Score: float64(lease.Unix()), Member: "task-a"}).Err())

	s.clock.add(inspect.GoneAfter)
	require.Equal(t, inspect.WorkerAlive, s.list(t)[0].State, "still alive at exactly GoneAfter")
	s.clock.add(time.Second)
	w = s.list(t)[0]
	require.Equal(t, inspect.WorkerGone, w.State)
	require.Equal(t, 1, w.Orphaned)
	require.True(t, w.Tasks[0].Orphaned)
	require.Equal(t, int64(3000), w.Tasks[0].RunningMS, "a gone worker's task ran until its last heartbeat")
	require.Equal(t, lease, *w.Tasks[0].LeaseExpiresAt)
	require.Equal(t, lease.Add(30*time.Second), *w.Tasks[0].RecoveryFrom)
	require.True(t, w.Tasks[0].RecoveryBy.After(*w.Tasks[0].RecoveryFrom))
	require.Len(t, w.Tasks, 1, "run-b, no longer leased (it ended, or runs elsewhere), is not the gone worker's any more")
}

// TestGoneWorkerShowsOnlyWhatItHolds (#39 item 7): a gone worker's
// in-flight list is not its last heartbeat's: it keeps only the tasks it
// still holds — leased with a lease it could have set, and, by their
// record, still active on it. A task whose record names another worker,
// whose record waits, or whose lease a later delivery took (the run
// recovered and running elsewhere) is not attributed to the dead worker.
func TestGoneWorkerShowsOnlyWhatItHolds(t *testing.T) {
	t.Parallel()
	s := setupHeartbeat(t)
	hb := s.heartbeat()
	host, _ := os.Hostname()
	me := host + ":" + strconv.Itoa(os.Getpid()) // the events' worker of this process
	st := record.NewStore(s.rdb)
	started := func(id, worker string) {
		seed := record.Seed{Agent: "tool", Queue: "default", EnqueuedAt: s.clock.now()}
		_, err := st.Create(s.ctx, record.New{ID: id, Seed: seed, State: record.StatePending})
		require.NoError(t, err)
		if worker != "" {
			out, err := st.Apply(s.ctx, record.Delivery{ID: id, Attempt: 1, Worker: worker, Seed: seed}, record.Started())
			require.NoError(t, err)
			require.Equal(t, record.Applied, out)
		}
	}
	started("mine", me)
	started("elsewhere", "other-host:7")
	started("waiting", "")
	started("relet", me)
	started("recovered", me) // asynq took it back: no lease
	for _, id := range []string{"mine", "elsewhere", "waiting", "relet", "recovered"} {
		hb.Track(id, id, "tool", "default")
	}
	require.NoError(t, hb.Beat(s.ctx))
	soon := s.clock.now().Add(30 * time.Second).Truncate(time.Second)
	later := s.clock.now().Add(3 * time.Minute).Truncate(time.Second) // a lease taken after the worker died
	for id, at := range map[string]time.Time{"mine": soon, "elsewhere": soon, "waiting": soon, "relet": later} {
		require.NoError(t, s.rdb.ZAdd(s.ctx, broker.LeaseKey("default"), redis.Z{Score: float64(at.Unix()), Member: id}).Err())
	}

	s.clock.add(inspect.GoneAfter + time.Second)
	ws := s.list(t)
	require.Len(t, ws, 1)
	w := ws[0]
	require.Equal(t, inspect.WorkerGone, w.State)
	require.Len(t, w.Tasks, 1, "%+v", w.Tasks)
	require.Equal(t, "mine", w.Tasks[0].ID)
	require.True(t, w.Tasks[0].Orphaned)
	require.Equal(t, soon, *w.Tasks[0].LeaseExpiresAt)
	require.Equal(t, 1, w.Orphaned)

	// The runs asynq took back while their record says they run on the
	// gone worker ("relet": running again elsewhere, its new delivery not
	// started yet; "recovered": waiting on its queue): Recovery puts their
	// records back to pending, with the lost attempt's event, once.
	lost, err := inspect.Recovered(s.ctx, s.rdb, s.clock.now())
	require.NoError(t, err)
	require.ElementsMatch(t, []inspect.LostTask{{ID: "relet", Worker: me}, {ID: "recovered", Worker: me}}, lost)
	rec := registry.NewRecovery(s.rdb, st, "w", nil, s.clock.now)
	rec.Check(s.ctx)
	rec.Check(s.ctx)
	for _, id := range []string{"relet", "recovered"} {
		v, err := st.Get(s.ctx, id)
		require.NoError(t, err)
		require.Equal(t, record.StatePending, v.State, id)
		require.Len(t, v.History, 2, id)
		require.Equal(t, record.EventInterrupted, v.History[1].Event)
		require.True(t, v.History[1].Lost)
		require.Equal(t, me, v.History[1].Worker)
	}
	for _, id := range []string{"mine", "elsewhere"} {
		v, err := st.Get(s.ctx, id)
		require.NoError(t, err)
		require.Equal(t, record.StateActive, v.State, "%s: still held, or another worker's", id)
	}
}

// TestWorkerRegistryBounded: entries of workers gone for KeepGone are
// dropped by the next heartbeat of any worker (and hidden until then),
// the registry keeps at most MaxWorkerEntries, its keys expire, and Stop
// removes the worker's own entry.
func TestWorkerRegistryBounded(t *testing.T) {
	t.Parallel()
	s := setupHeartbeat(t)
	old := s.heartbeat()
	require.NoError(t, old.Beat(s.ctx))
	s.clock.add(inspect.KeepGone + time.Second)
	require.Empty(t, s.list(t), "an entry older than KeepGone is not listed")
	require.EqualValues(t, 1, s.rdb.HLen(s.ctx, rkeys.Workers()).Val())

	// Many short-lived workers, then one more: the oldest go beyond the cap.
	pipe := s.rdb.Pipeline()
	for i := range inspect.MaxWorkerEntries + 5 {
		id := "w-" + time.Duration(i).String()
		pipe.HSet(s.ctx, rkeys.Workers(), id, `{"id":"`+id+`"}`)
		pipe.ZAdd(s.ctx, rkeys.WorkersBeats(), redis.Z{Score: float64(s.clock.now().UnixMilli() - int64(inspect.MaxWorkerEntries+5-i)), Member: id})
	}
	_, err := pipe.Exec(s.ctx)
	require.NoError(t, err)
	hb := s.heartbeat()
	hb.Start(s.ctx)
	require.Eventually(t, func() bool {
		return s.rdb.HExists(s.ctx, rkeys.Workers(), hb.ID()).Val() &&
			!s.rdb.HExists(s.ctx, rkeys.Workers(), old.ID()).Val()
	}, 10*time.Second, 10*time.Millisecond, "the heartbeat wrote its entry and dropped the old one")
	require.LessOrEqual(t, s.rdb.HLen(s.ctx, rkeys.Workers()).Val(), int64(inspect.MaxWorkerEntries), "capped")
	require.Equal(t, s.rdb.HLen(s.ctx, rkeys.Workers()).Val(), s.rdb.ZCard(s.ctx, rkeys.WorkersBeats()).Val())
	require.False(t, s.rdb.HExists(s.ctx, rkeys.Workers(), "w-0s").Val(), "the oldest went first")
	ttl := s.rdb.PTTL(s.ctx, rkeys.Workers()).Val()
	require.True(t, ttl > 0 && ttl <= inspect.KeepGone, "the registry expires: %s", ttl)

	hb.Stop()
	hb.Stop() // idempotent
	require.False(t, s.rdb.HExists(s.ctx, rkeys.Workers(), hb.ID()).Val(), "a clean stop removes the entry")
	never := s.heartbeat()
	never.Stop() // never started: writes nothing
}
