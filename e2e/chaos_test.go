package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/tasks"
)

// TestChaos runs the chaos tests one after another (each starts several
// worker processes and loads them; on a small machine two at once would
// measure each other rather than the worker), while the package's other
// tests run beside them.
func TestChaos(t *testing.T) {
	t.Parallel()
	t.Run("KillWorkerUnderLoad", testChaosKillWorkerUnderLoad)
	t.Run("RedisRestart", testChaosRedisRestart)
	t.Run("RedisOutage", testChaosRedisOutage)
	t.Run("SIGTERMUnderLoad", testChaosSIGTERMUnderLoad)
	t.Run("RecordRedisPause", testChaosRecordRedisPause)
	t.Run("RecordRedisRestart", testChaosRecordRedisRestart)
}

// chaosMix returns n task lines with a fixed mix of kinds: 60% quick
// successes, 25% flaky (503 once or twice, then success, within one run's
// four attempts even if a crash uses one of them), 15% dead-lettered at
// the first attempt (400 invalid_request). It returns the kind of each ID.
func chaosMix(prefix string, n, ms int, seed uint64) ([]string, []string, map[string]string) {
	r := rand.New(rand.NewPCG(seed, seed))
	var lines, ids []string
	kinds := map[string]string{}
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("%s-%04d", prefix, i)
		p := chaosParams{Kind: chaosOK, MS: ms}
		switch x := r.IntN(100); {
		case x < 15:
			p.Kind = chaosBad
		case x < 40:
			p.Kind, p.Fail = chaosFlaky, 1+r.IntN(2)
		}
		lines = append(lines, chaosLine(id, p))
		ids = append(ids, id)
		kinds[id] = p.Kind
	}
	return lines, ids, kinds
}

// testChaosKillWorkerUnderLoad: three worker processes run 3,000 mixed
// tasks; one is killed with SIGKILL when about a third are done. Every task
// ends in the one terminal state its kind is designed for (none lost, none
// both), and the tasks the dead worker held are recovered through asynq's
// lease expiry. Duplicate side effects (at-least-once) are counted and
// logged.
//
// asynq v0.26 cannot be told to recover sooner: its lease is a constant
// 30s (rdb.LeaseDuration), its recoverer only takes leases that expired
// more than 30s ago (clock-skew allowance) and runs at a server's start
// and then every minute (hard-coded). Unassisted, a killed worker's tasks
// are picked up 60-120s after the kill. The test waits until the dead
// worker's leases are the only ones not being extended (live workers
// extend theirs every 5s), moves just those expiries a minute into the
// past — what the passage of time would do — and starts the replacement,
// whose recoverer then runs asynq's own recovery at once.
func testChaosKillWorkerUnderLoad(t *testing.T) {
	b := buildBins(t)
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	be := newChaosBackend(t)
	cfg := chaosConfig(t, be.srv.URL, 16, "")

	const n = 3000
	lines, ids, kinds := chaosMix("k", n, 15, 1)
	got, code, errOut := chaosEnqueue(t, b, srv.URL(), lines)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, ids, got, "the enqueuer acknowledges every task")
	began := time.Now()
	workers := make([]*proc, 3)
	for i := range workers {
		workers[i] = start(t, fmt.Sprintf("worker-%d", i), b.worker, "--config", cfg, "--redis", srv.URL())
	}

	poll(t, 60*time.Second, "a third of the tasks to finish", func() bool { return be.finals.Load() >= n/3 })
	victim := workers[0]
	victim.signal(syscall.SIGKILL)
	<-victim.done
	killedAt := time.Now()
	var ee *exec.ExitError
	require.True(t, errors.As(victim.err, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL, "victim: %v", victim.err)
	doneAtKill := be.finals.Load()
	t.Logf("killed worker-0 (SIGKILL) %s after the workers started, %d of %d tasks finished", killedAt.Sub(began).Round(time.Millisecond), doneAtKill, n)

	// The live workers extend their leases every 5s to now+30s; the dead
	// worker's leases stay at most 30s past the kill. Wait until the two
	// sets cannot overlap, then take the dead worker's.
	leaseKey := chaosLeaseKey
	deadLine := float64(killedAt.Unix() + 30)
	time.Sleep(time.Until(killedAt.Add(8 * time.Second)))
	orphans, err := rdb.ZRangeByScoreWithScores(ctx, leaseKey, &redis.ZRangeBy{Min: "-inf", Max: strconv.FormatFloat(deadLine, 'f', 0, 64)}).Result()
	require.NoError(t, err)
	require.NotEmpty(t, orphans, "the killed worker held no task: it was killed idle")
	var orphanIDs []string
	for _, z := range orphans {
		orphanIDs = append(orphanIDs, z.Member.(string))
	}
	sort.Strings(orphanIDs)
	insp := asynq.NewInspectorFromRedisClient(rdb)
	for _, id := range orphanIDs {
		info, err := insp.GetTaskInfo(tasks.DefaultQueue, id)
		require.NoError(t, err, id)
		require.Equal(t, asynq.TaskStateActive, info.State, "%s: held by the dead worker, so still active", id)
	}
	expiresIn := time.Unix(int64(orphans[len(orphans)-1].Score), 0).Sub(killedAt)
	t.Logf("the dead worker held %d tasks; their leases expire %s after the kill; asynq's recoverer would take them 30s after that, on its next 1-minute tick",
		len(orphans), expiresIn.Round(time.Second))
	past := float64(time.Now().Add(-time.Minute).Unix())
	for _, id := range orphanIDs {
		require.NoError(t, rdb.ZAddXX(ctx, leaseKey, redis.Z{Score: past, Member: id}).Err())
	}

	// The replacement's recoverer runs at its start.
	replacedAt := time.Now()
	start(t, "worker-3", b.worker, "--config", cfg, "--redis", srv.URL())
	poll(t, 30*time.Second, "the dead worker's tasks to leave the active set", func() bool {
		for _, id := range orphanIDs {
			if info, err := insp.GetTaskInfo(tasks.DefaultQueue, id); err == nil && info.State == asynq.TaskStateActive {
				if s, _ := rdb.ZScore(ctx, leaseKey, id).Result(); s <= past {
					return false
				}
			}
		}
		return true
	})
	pickedUp := time.Since(replacedAt)
	chaosWaitTerminal(t, rdb, orphanIDs, 30*time.Second)
	orphansDone := time.Since(replacedAt)
	states := chaosWaitTerminal(t, rdb, ids, 60*time.Second)
	allDone := time.Since(killedAt)
	t.Logf("recovery: replacement started %s after the kill; it put the %d orphaned tasks back within %s and they were all terminal %s after its start; all %d tasks terminal %s after the kill (%s after the workers started)",
		replacedAt.Sub(killedAt).Round(time.Millisecond), len(orphanIDs), pickedUp.Round(time.Millisecond),
		orphansDone.Round(time.Millisecond), n, allDone.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))

	chaosCheckOutcomes(t, rdb, kinds, states)
	for _, id := range ids {
		if kinds[id] != chaosBad {
			require.Positive(t, be.successCount(id), "%s succeeded without a successful backend call", id)
		}
	}
	dups := be.duplicates()
	extra, orphanDups := 0, 0
	isOrphan := map[string]bool{}
	for _, id := range orphanIDs {
		isOrphan[id] = true
	}
	for id, d := range dups {
		extra += d
		if isOrphan[id] {
			orphanDups++
		}
	}
	t.Logf("duplicates (at-least-once): %d tasks had their success answered more than once (%d extra calls); %d of them were held by the killed worker",
		len(dups), extra, orphanDups)
	require.LessOrEqual(t, len(dups), len(orphanIDs), "only the dead worker's tasks may run twice")
	for id := range dups {
		require.True(t, isOrphan[id], "%s ran twice but was not held by the killed worker", id)
	}
	for i, w := range workers[1:] {
		require.True(t, chaosAlive(w), "worker-%d died", i+1)
	}
}

// testChaosRedisRestart: Redis with appendonly (fsync always) is shut down
// and started again on the same port and data while tasks are being
// enqueued and run. Every enqueue the enqueuer acknowledged (printed its ID)
// survives and finishes, and the workers ride it out: same processes, no
// restart.
func testChaosRedisRestart(t *testing.T) {
	b := buildBins(t)
	srv := redistest.Start(t, redistest.WithAOF())
	rdb := srv.Client()
	be := newChaosBackend(t)
	cfg := chaosConfig(t, be.srv.URL, 8, "")
	workers := []*proc{
		start(t, "worker-0", b.worker, "--config", cfg, "--redis", srv.URL()),
		start(t, "worker-1", b.worker, "--config", cfg, "--redis", srv.URL()),
	}
	pids := []int{workers[0].cmd.Process.Pid, workers[1].cmd.Process.Pid}

	// Enqueue 600 tasks in batches of 25 while the workers run.
	const batches, per = 24, 25
	lines, _, kinds := chaosMix("rr", batches*per, 20, 2)
	var (
		mu    sync.Mutex
		acked []string
		fails int
	)
	enqDone := make(chan struct{})
	go func() {
		defer close(enqDone)
		for i := 0; i < batches; i++ {
			got, code, _ := chaosEnqueue(t, b, srv.URL(), lines[i*per:(i+1)*per])
			mu.Lock()
			acked = append(acked, got...)
			if code != 0 {
				fails++
			}
			mu.Unlock()
			time.Sleep(100 * time.Millisecond)
		}
	}()
	poll(t, 60*time.Second, "a third of the batch to finish", func() bool { return be.finals.Load() >= batches*per/3 })
	before := be.finals.Load()
	runID := chaosRedisRunID(t, rdb)
	srv.Stop()
	stoppedAt := time.Now()
	// Down for a second: long enough for calls in flight to fail and for an
	// enqueuer run to find no Redis.
	time.Sleep(time.Second)
	srv.Restart()
	t.Logf("redis restarted (SIGTERM, down 1s, start on the same AOF) in %s with %d tasks finished", time.Since(stoppedAt).Round(time.Millisecond), before)
	require.NotEqual(t, runID, chaosRedisRunID(t, rdb), "a new redis-server process")
	<-enqDone

	mu.Lock()
	ids := append([]string(nil), acked...)
	t.Logf("%d of %d enqueues acknowledged; %d enqueuer runs failed while Redis was down", len(ids), batches*per, fails)
	mu.Unlock()
	require.GreaterOrEqual(t, len(ids), batches*per/2)
	states, recovered := chaosWaitOrRecover(t, rdb, ids, 30*time.Second, "worker-recovery", b.worker, "--config", cfg, "--redis", srv.URL())
	t.Logf("%d tasks were stranded in asynq's active set by the restart and needed lease recovery", recovered)
	ackedKinds := map[string]string{}
	for _, id := range ids {
		ackedKinds[id] = kinds[id]
	}
	// Tasks the enqueuer did not acknowledge may or may not exist; the
	// acknowledged ones are checked in full.
	chaosCheckOutcomesSubset(t, rdb, ackedKinds, states)
	for i, w := range workers {
		require.True(t, chaosAlive(w), "worker-%d exited", i)
		require.Equal(t, pids[i], w.cmd.Process.Pid)
	}
	dups := be.duplicates()
	t.Logf("duplicates (at-least-once): %d tasks had their success answered more than once", len(dups))
}

// chaosRedisRunID is the redis-server's run_id (new in every process).
func chaosRedisRunID(t *testing.T, rdb *redis.Client) string {
	t.Helper()
	info, err := rdb.Info(context.Background(), "server").Result()
	require.NoError(t, err)
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "run_id:"); ok {
			return v
		}
	}
	t.Fatal("no run_id in INFO server")
	return ""
}

// chaosCheckOutcomesSubset is chaosCheckOutcomes for some of the tasks in
// Redis: it checks the states of the tasks in kinds only, and that asynq
// holds nothing any more.
func chaosCheckOutcomesSubset(t *testing.T, rdb redis.UniversalClient, kinds map[string]string, states map[string]tasks.State) {
	t.Helper()
	for id, kind := range kinds {
		want := tasks.StateSucceeded
		if kind == chaosBad {
			want = tasks.StateDeadLettered
		}
		require.Equal(t, want, states[id], id)
	}
	poll(t, 30*time.Second, "asynq to hold no task", func() bool {
		qi, err := asynq.NewInspectorFromRedisClient(rdb).GetQueueInfo(tasks.DefaultQueue)
		return err == nil && qi.Pending+qi.Active+qi.Scheduled+qi.Retry+qi.Archived == 0
	})
}

// testChaosRedisOutage: Redis is stopped for 20s under load. The worker
// processes stay up, do not spin (CPU time over the outage is measured
// from /proc), answer /readyz with 503 throughout, and once Redis is back
// they are ready and run tasks again within seconds; every acknowledged
// task finishes.
func testChaosRedisOutage(t *testing.T) {
	b := buildBins(t)
	srv := redistest.Start(t, redistest.WithAOF())
	rdb := srv.Client()
	be := newChaosBackend(t)
	cfg := chaosConfig(t, be.srv.URL, 4, "")
	var workers []*proc
	var ops []string
	for i := 0; i < 2; i++ {
		addr := freeAddr(t)
		ops = append(ops, "http://"+addr+"/readyz")
		workers = append(workers, start(t, fmt.Sprintf("worker-%d", i), b.worker, "--config", cfg, "--redis", srv.URL(), "--http", addr))
	}
	for _, u := range ops {
		waitHTTP(t, u, 30*time.Second)
	}
	const n = 300
	lines, ids, kinds := chaosMix("out", n, 60, 3)
	got, code, errOut := chaosEnqueue(t, b, srv.URL(), lines)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, ids, got)
	poll(t, 60*time.Second, "a third of the tasks to finish", func() bool { return be.finals.Load() >= n/3 })

	const outage = 20 * time.Second
	srv.Stop()
	stoppedAt := time.Now()
	finalsAtStop := be.finals.Load()
	// Let in-flight calls end, then measure the idle outage.
	time.Sleep(2 * time.Second)
	cpu0 := make([]int64, len(workers))
	for i, w := range workers {
		cpu0[i] = chaosCPUTicks(t, w.cmd.Process.Pid)
	}
	measured := time.Now()
	saw503 := make([]int, len(workers))
	for time.Since(stoppedAt) < outage {
		for i, u := range ops {
			switch c := chaosHTTPStatus(u); c {
			case 503:
				saw503[i]++
			default:
				t.Errorf("worker-%d /readyz answered %d while Redis was down", i, c)
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	window := time.Since(measured)
	for i, w := range workers {
		require.True(t, chaosAlive(w), "worker-%d exited during the outage", i)
		used := time.Duration(chaosCPUTicks(t, w.cmd.Process.Pid)-cpu0[i]) * time.Second / chaosUserHZ
		share := float64(used) / float64(window)
		t.Logf("worker-%d used %s CPU over %s of outage (%.1f%% of one core); /readyz 503 x%d",
			i, used, window.Round(time.Millisecond), 100*share, saw503[i])
		require.Less(t, share, 0.30, "worker-%d spins while Redis is down", i)
		require.Positive(t, saw503[i])
	}
	finalsDuring := be.finals.Load() - finalsAtStop

	srv.Restart()
	back := time.Now()
	ready := make([]time.Duration, len(ops))
	for i, u := range ops {
		waitHTTP(t, u, 30*time.Second)
		ready[i] = time.Since(back)
	}
	// A fresh task enqueued now must run: work has resumed.
	probe := "out-probe"
	_, code, errOut = chaosEnqueue(t, b, srv.URL(), []string{chaosLine(probe, chaosParams{Kind: chaosOK})})
	require.Equal(t, 0, code, errOut)
	chaosWaitTerminal(t, rdb, []string{probe}, 30*time.Second)
	probeDone := time.Since(back)
	t.Logf("after the outage: /readyz 200 after %v; a task enqueued after the restart succeeded %s after Redis was back; %d tasks finished (agent answered) during the outage",
		ready, probeDone.Round(time.Millisecond), finalsDuring)
	for i := range ready {
		require.Less(t, ready[i], 10*time.Second, "worker-%d ready again", i)
	}
	require.Less(t, probeDone, 10*time.Second, "work resumes")

	states, recovered := chaosWaitOrRecover(t, rdb, ids, 20*time.Second, "worker-recovery", b.worker, "--config", cfg, "--redis", srv.URL())
	t.Logf("%d tasks were stranded in asynq's active set by the outage and needed lease recovery", recovered)
	chaosCheckOutcomes(t, rdb, withProbe(kinds, probe), withState(states, probe, tasks.StateSucceeded))
	for i, w := range workers {
		require.True(t, chaosAlive(w), "worker-%d exited", i)
	}
}

func withProbe(kinds map[string]string, id string) map[string]string {
	kinds[id] = chaosOK
	return kinds
}

func withState(states map[string]tasks.State, id string, s tasks.State) map[string]tasks.State {
	states[id] = s
	return states
}

// testChaosSIGTERMUnderLoad: a worker running exec agents that sleep, some
// for longer than shutdown_timeout and some ignoring SIGTERM, gets SIGTERM.
// It exits within shutdown_timeout plus the agents' kill grace and a little
// slack; every in-flight task either finished or is back on the queue
// without using an attempt; none of the agents it started is left running;
// and a replacement worker finishes every task.
func testChaosSIGTERMUnderLoad(t *testing.T) {
	b := buildBins(t)
	srv := redistest.Start(t)
	rdb := srv.Client()
	effects := filepath.Join(t.TempDir(), "effects")
	const shutdownTimeout = 2 * time.Second
	cfg := writeConfig(t, fmt.Sprintf(`
worker: {concurrency: 6, shutdown_timeout: %s}
defaults:
  timeout: 60s
  retry: {max_attempts: 2, initial_backoff: 50ms, max_backoff: 100ms}
  circuit_breaker: {failure_threshold: 1000000, cooldown: 1s}
agents:
  tool: {exec: {command: [%q]}}
`, shutdownTimeout, b.agent))
	w := start(t, "worker-0", b.worker, "--config", cfg, "--redis", srv.URL())

	// 6 short sleeps (finish within shutdown_timeout), 6 long ones (do not),
	// 2 of those ignoring SIGTERM, and 8 more waiting in the queue.
	var lines, ids []string
	sleepMS := map[string]int{}
	for i := 0; i < 20; i++ {
		id := fmt.Sprintf("term-%02d", i)
		ms := 200 + 50*i
		ignore := false
		if i%2 == 1 {
			ms = 6000
			ignore = i%4 == 1
		}
		sleepMS[id] = ms
		lines = append(lines, fmt.Sprintf(`{"id":%q,"agent":"tool","params":{"mode":"sleep","ms":%d,"ignore_term":%t,"effects":%q}}`, id, ms, ignore, effects))
		ids = append(ids, id)
	}
	// Enqueue in order so that the first 6 delivered mix short and long.
	out, errOut, code := run(t, strings.Join(lines, "\n")+"\n", b.enqueuer, "--redis", srv.URL(), "--file", "-")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, ids, strings.Fields(out))
	poll(t, 30*time.Second, "six agents running", func() bool { return len(chaosReadEffects(t, effects)) >= 6 })
	// Let the longest-running tasks be clearly mid-call.
	time.Sleep(300 * time.Millisecond)

	began := time.Now()
	require.Equal(t, 0, w.stop(t, 30*time.Second), "worker exit status after SIGTERM")
	took := time.Since(began)
	ran := chaosReadEffects(t, effects)
	t.Logf("worker exited %s after SIGTERM (shutdown_timeout %s) with %d agent calls started", took.Round(time.Millisecond), shutdownTimeout, len(ran))
	// shutdown_timeout, then the agents' kill grace (2s), then slack for the machine.
	require.Less(t, took, shutdownTimeout+2*time.Second+6*time.Second)

	for _, e := range ran {
		requireGone(t, e.pid, 10*time.Second)
	}
	st := tasks.NewStore(rdb)
	insp := asynq.NewInspectorFromRedisClient(rdb)
	var finished, putBack int
	for _, e := range ran {
		v, err := st.Get(context.Background(), e.task)
		require.NoError(t, err, e.task)
		switch v.State {
		case tasks.StateSucceeded:
			finished++
		default:
			putBack++
			require.Equal(t, tasks.StatePending, v.State, "%s: in flight at SIGTERM and not finished: back on the queue", e.task)
			info, err := insp.GetTaskInfo(tasks.DefaultQueue, e.task)
			require.NoError(t, err, e.task)
			require.Equal(t, asynq.TaskStatePending, info.State, e.task)
			require.Equal(t, 0, info.Retried, "%s: putting back uses no attempt", e.task)
			require.Equal(t, tasks.EventInterrupted, v.History[len(v.History)-1].Event, e.task)
			require.Greater(t, sleepMS[e.task], int(shutdownTimeout/time.Millisecond), "%s: a short task was cut off", e.task)
		}
	}
	t.Logf("in flight at SIGTERM: %d finished, %d put back", finished, putBack)
	require.Positive(t, putBack)

	// The replacement finishes every task, the put-back ones included.
	start(t, "worker-1", b.worker, "--config", cfg, "--redis", srv.URL(), "--concurrency", "20")
	views := waitStates(t, rdb, ids, 60*time.Second)
	for _, id := range ids {
		require.Equal(t, tasks.StateSucceeded, views[id].State, id)
	}
}
