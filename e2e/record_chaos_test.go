package e2e

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/tasks"
)

// The record under a Redis that loses replies (#25 item 2): a write whose
// reply is lost and that is sent again must not be applied twice. These
// run as subtests of TestChaos (one heavy test at a time).

// testChaosRecordRedisPause: 900 mixed tasks run on three workers (half
// enqueued before they start, half in batches as they run); when a third
// are done the redis-server is frozen
// (SIGSTOP) for 20s and then resumed (SIGCONT). While it is frozen the
// kernel still takes what clients send; the clients time out and, once
// Redis is back, send again what Redis is about to run anyway. Every
// acknowledged task ends in the one terminal state its kind is designed
// for, with exactly one terminal event in its history, and the dead-letter
// store holds exactly the tasks designed to dead-letter.
func testChaosRecordRedisPause(t *testing.T) {
	testChaosRecord(t, "rp", 5, false, func(t *testing.T, srv *redistest.Server, _ *redis.Client, _ func() int64) string {
		const pause = 20 * time.Second
		srv.Pause()
		time.Sleep(pause) // the outage itself: a frozen Redis for this long, by design
		srv.Resume()
		return fmt.Sprintf("redis-server frozen (SIGSTOP) for %s, then resumed (SIGCONT)", pause)
	})
}

// testChaosRecordRedisRestart: the same load, with clean redis-server
// shutdowns (SIGTERM: the replies to the commands it ran in its last
// moments are lost as it closes its connections) and restarts on the same
// AOF (fsync always) mid-load: at a third, a half and two thirds of the
// tasks done (one lost reply is a narrow window; three give it three
// chances).
func testChaosRecordRedisRestart(t *testing.T) {
	testChaosRecord(t, "rs", 6, true, func(t *testing.T, srv *redistest.Server, rdb *redis.Client, finished func() int64) string {
		var downs []string
		for i, at := range []int64{0, 450, 600} { // the first one now, at a third
			poll(t, 60*time.Second, fmt.Sprintf("%d tasks to finish", at), func() bool { return finished() >= at })
			runID := chaosRedisRunID(t, rdb)
			srv.Stop()
			stoppedAt := time.Now()
			// Down for a moment: long enough for calls in flight to fail and
			// for an enqueuer run to find no Redis.
			time.Sleep(time.Second)
			srv.Restart()
			require.NotEqual(t, runID, chaosRedisRunID(t, rdb), "restart %d: a new redis-server process", i+1)
			downs = append(downs, time.Since(stoppedAt).Round(time.Millisecond).String())
		}
		return fmt.Sprintf("redis-server shut down (SIGTERM) and restarted on the same AOF %d times, back after %v", len(downs), downs)
	})
}

// testChaosRecord runs 900 chaosMix tasks (prefix, seed) on three workers,
// half enqueued before they start and half in batches as they run,
// calls outage when a third are done,
// and checks every task's record: see testChaosRecordRedisPause.
func testChaosRecord(t *testing.T, prefix string, seed uint64, aof bool,
	outage func(t *testing.T, srv *redistest.Server, rdb *redis.Client, finished func() int64) string) {
	b := buildBins(t)
	var opts []redistest.Option
	if aof {
		opts = append(opts, redistest.WithAOF())
	}
	srv := redistest.Start(t, opts...)
	rdb := srv.Client()
	be := newChaosBackend(t)
	cfg := chaosConfig(t, be.srv.URL, 12, "")

	// Half the tasks are enqueued before the workers start, so that the
	// workers are busy (not waiting for work) when the outage comes; the
	// rest in batches as they run, so that enqueues meet the outage too.
	const n, head, per = 900, 450, 25
	// Two tasks in three have a call that outlasts beginGrace (100ms), so that its
	// attempt's start is written before its outcome and the outcome is a
	// write of its own; the third end sooner, their start written with
	// the outcome (for a quick success, inside asynq's ack). Same seed: the
	// same kinds.
	quick, _, _ := chaosMix(prefix, n, 20, seed)
	slow, all, kinds := chaosMix(prefix, n, 120, seed)
	lines := make([]string, n)
	for i := range lines {
		lines[i] = quick[i]
		if i%3 != 0 {
			lines[i] = slow[i]
		}
	}
	got, code, errOut := chaosEnqueue(t, b, srv.URL(), lines[:head])
	require.Equal(t, 0, code, errOut)
	require.Equal(t, all[:head], got)
	workers := make([]*proc, 3)
	pids := make([]int, len(workers))
	for i := range workers {
		workers[i] = start(t, fmt.Sprintf("worker-%d", i), b.worker, "--config", cfg, "--redis", srv.URL())
		pids[i] = workers[i].cmd.Process.Pid
	}
	var (
		mu    sync.Mutex
		acked = got
		fails int
	)
	enqDone := make(chan struct{})
	go func() {
		defer close(enqDone)
		for i := head; i < n; i += per {
			got, code, _ := chaosEnqueue(t, b, srv.URL(), lines[i:i+per])
			mu.Lock()
			acked = append(acked, got...)
			if code != 0 {
				fails++
			}
			mu.Unlock()
			time.Sleep(300 * time.Millisecond)
		}
	}()
	poll(t, 60*time.Second, "a third of the tasks to finish", func() bool { return be.finals.Load() >= n/3 })
	before := be.finals.Load()
	what := outage(t, srv, rdb, be.finals.Load)
	t.Logf("%s, with %d of %d tasks finished", what, before, n)
	<-enqDone

	mu.Lock()
	ids := append([]string(nil), acked...)
	t.Logf("%d of %d enqueues acknowledged; %d enqueuer runs failed during the outage", len(ids), n, fails)
	mu.Unlock()
	require.GreaterOrEqual(t, len(ids), n/2)
	states, recovered := chaosWaitOrRecover(t, rdb, ids, 25*time.Second, "worker-recovery", b.worker, "--config", cfg, "--redis", srv.URL())
	t.Logf("%d tasks were stranded in asynq's active set by the outage and needed lease recovery", recovered)

	// Unacknowledged tasks may or may not exist; those that do are held to
	// at most one terminal event, the acknowledged ones to exactly one.
	isAcked := map[string]bool{}
	ackedKinds := map[string]string{}
	for _, id := range ids {
		isAcked[id] = true
		ackedKinds[id] = kinds[id]
	}
	var unacked []string
	for _, id := range all {
		if !isAcked[id] {
			unacked = append(unacked, id)
		}
	}
	chaosCheckOneTerminalEvent(t, rdb, ids, unacked)
	chaosCheckOutcomesSubset(t, rdb, ackedKinds, states)
	chaosCheckDeadLetters(t, rdb, kinds, isAcked)
	for i, w := range workers {
		require.True(t, chaosAlive(w), "worker-%d exited", i)
		require.Equal(t, pids[i], w.cmd.Process.Pid)
	}
	t.Logf("duplicates (at-least-once): %d tasks had their success answered more than once by the agent", len(be.duplicates()))
}

// chaosTerminalEvents are the events that end a task: exactly one per
// finished task.
var chaosTerminalEvents = map[string]bool{
	tasks.EventSucceeded:    true,
	tasks.EventDeadLettered: true,
	tasks.EventTaskCanceled: true,
}

// chaosCheckOneTerminalEvent checks the history of each task: exactly one
// terminal event (succeeded, dead_lettered or task_canceled) for each of
// ids, at most one for each of maybe that has a record (tasks whose
// enqueue was not acknowledged). It logs how many tasks broke the rule,
// a few of their histories, and how many repeat an attempt's transition
// (the same event for the same restart and attempt: a retried write
// applied twice), then fails the test (not at once: the other checks
// still report) when any task has other than one terminal event.
func chaosCheckOneTerminalEvent(t *testing.T, rdb redis.UniversalClient, ids, maybe []string) {
	t.Helper()
	ctx := context.Background()
	st := tasks.NewStore(rdb)
	var bad, twice []string
	repeats := 0
	history := map[string]string{}
	check := func(id string, must bool) {
		v, err := st.Get(ctx, id)
		if !must && errors.Is(err, tasks.ErrNotFound) {
			return
		}
		require.NoError(t, err, id)
		terminal := 0
		type transition struct {
			event            string
			restart, attempt int
		}
		seen := map[transition]bool{}
		repeated := false
		var names []string
		for _, ev := range v.History {
			names = append(names, fmt.Sprintf("%s(r%d,a%d)", ev.Event, ev.Restart, ev.Attempt))
			if chaosTerminalEvents[ev.Event] {
				terminal++
			}
			if ev.AttemptOutcome() {
				k := transition{ev.Event, ev.Restart, ev.Attempt}
				repeated = repeated || seen[k]
				seen[k] = true
			}
		}
		if repeated {
			repeats++
		}
		history[id] = strings.Join(names, ",")
		switch {
		case terminal > 1:
			twice = append(twice, id)
			bad = append(bad, id)
		case terminal == 0 && must:
			bad = append(bad, id)
		}
	}
	for _, id := range ids {
		check(id, true)
	}
	for _, id := range maybe {
		check(id, false)
	}
	sort.Strings(bad)
	t.Logf("terminal events: %d of %d tasks have two or more, %d have other than exactly one; %d repeat an attempt's transition (same event, restart and attempt)",
		len(twice), len(history), len(bad), repeats)
	for _, id := range bad[:min(len(bad), 5)] {
		t.Logf("task %s: history %s", id, history[id])
	}
	if len(bad) > 0 {
		t.Errorf("%d tasks do not have exactly one terminal event (%d have two or more), e.g. %v", len(bad), len(twice), bad[:min(len(bad), 10)])
	}
}

// chaosCheckDeadLetters checks that the dead-letter store holds exactly the
// tasks designed to dead-letter: every acknowledged one of kind bad, and
// nothing that is not of kind bad (an unacknowledged bad task may be
// there or not), each once.
func chaosCheckDeadLetters(t *testing.T, rdb redis.UniversalClient, kinds map[string]string, acked map[string]bool) {
	t.Helper()
	ctx := context.Background()
	store := deadletter.NewStore(rdb)
	dlqIDs, err := store.IDs(ctx, deadletter.Filter{})
	require.NoError(t, err)
	count, err := store.Count(ctx)
	require.NoError(t, err)
	in := map[string]bool{}
	for _, id := range dlqIDs {
		require.False(t, in[id], "dead letter %s listed twice", id)
		in[id] = true
		require.Equal(t, chaosBad, kinds[id], "dead letter %s is not a task designed to dead-letter", id)
	}
	require.EqualValues(t, len(dlqIDs), count, "the dead-letter store's count and its entries")
	want := 0
	for id, kind := range kinds {
		if kind == chaosBad && acked[id] {
			want++
			require.True(t, in[id], "%s: designed to dead-letter, acknowledged, not in the dead-letter store", id)
		}
	}
	t.Logf("dead-letter store: %d entries, %d of them acknowledged tasks designed to dead-letter", len(dlqIDs), want)
}

// TestAttemptCountedWhenWorkerDiesEarly (#25 item 2): a worker that dies
// as an agent call starts, before the attempt's start is written (on a
// first delivery it is written beginGrace, 100ms, into the call), still
// used an attempt: the task's record counts the deliveries. The failpoint
// call_started kills the first worker there; once asynq's lease recovery
// gives the task to a second worker, that one runs it to success, and the
// record says two attempts.
func TestAttemptCountedWhenWorkerDiesEarly(t *testing.T) {
	t.Parallel()
	b := buildBins(t)
	srv := redistest.Start(t)
	rdb := srv.Client()
	be := newFlakyBackend(t, func(string, int) bool { return false })
	cfg := restartConfig(t, be.srv.URL, "{max_restarts: 0}")
	const id = "early-1"

	crashAtFailpoint(t, b, srv, cfg, "call_started", id)
	require.Empty(t, be.runs(id), "the first worker died before it called the agent")

	// The lease the dead worker held: into the past, so that the second
	// worker's recoverer takes it at its start (see expireLease).
	expireLease(t, rdb, id)
	w2 := start(t, "worker-2", b.worker, "--config", cfg, "--redis", srv.URL())
	v := waitStates(t, rdb, []string{id}, 30*time.Second)[id]
	require.Equal(t, tasks.StateSucceeded, v.State, "%v", eventNames(v.History))
	require.Equal(t, map[int]int{0: 1}, be.runs(id), "one call reached the agent: the second worker's")

	view := inspectorTask(t, b, srv.URL(), id)
	require.Equal(t, tasks.StateSucceeded, view.State)
	require.Equal(t, 2, view.Attempts, "two deliveries, the first of which died as its call started: %v", eventNames(view.History))
	require.Equal(t, 0, w2.stop(t, 15*time.Second))
}
