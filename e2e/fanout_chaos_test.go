package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/tasks"
)

// fanoutConfig is the config of the fan-out tests' workers: one exec
// agent, the test agent, for the parent and its children.
const fanoutConfig = `
worker: {concurrency: %d, shutdown_timeout: 3s}
defaults:
  timeout: 1m
  retry: {max_attempts: 6, initial_backoff: 50ms, max_backoff: 200ms, jitter: 0}
  circuit_breaker: {failure_threshold: 1000000, cooldown: 1s}
agents:
  testagent: {exec: {command: [%q]}}
`

// fanoutChildTokens is the usage each child of the fan-out reports.
const fanoutChildTokens = 100

// TestFanOutUnderChaos (#37, "What it must show"): a fan-out of 50
// children with mode all under worker kills and a Redis restart (AOF).
// Real worker processes (concurrency 3 each) run the test agent: the
// parent (mode fanout) suspends with 50 children, each an echo that takes
// 800 ms and reports 100 tokens of usage; the parent's max_tokens (twice
// the children's total) caps the tree. While the children run, worker-0
// is SIGKILLed, Redis is stopped and restarted on its AOF, and worker-1 is
// SIGKILLed; replacements start after each kill. Work the dead workers
// held (and runs the restart stranded in asynq's active set) comes back
// through asynq's lease recovery, fast-forwarded (leases nobody extends
// moved into the past, then a worker started: its recoverer runs at once).
// Then:
//   - every child ended once: succeeded, with exactly one terminal event in
//     its history;
//   - the parent resumed once (one `resumed` event, by children) and
//     succeeded with the 50 children's ends in spawn order (P.c1…P.c50,
//     each result its own echo);
//   - the tree's budget holds: the sum of the children's usage is 50×100;
//     the root's tree usage (debited per call, as the call ends) is that
//     sum plus 100 per call that ended but whose outcome a kill lost — so
//     at least the sum, at most the sum plus 100 per extra agent start
//     (the effects log), exactly the sum when no child ran twice — and
//     what the tree spent is within the root's max_tokens; no tree debit
//     is given up during the Redis restart (a debit waits for Redis, as
//     the outcome's write does).
func TestFanOutUnderChaos(t *testing.T) {
	t.Parallel()
	const n, parent = 50, "fan"
	b := buildBins(t)
	srv := redistest.Start(t, redistest.WithAOF())
	rdb := srv.Client()
	ctx := context.Background()
	cfg := writeConfig(t, fmt.Sprintf(fanoutConfig, 3, b.agent))
	effects := filepath.Join(t.TempDir(), "effects")
	var workers []*proc
	startWorker := func() *proc {
		w := start(t, "worker-"+strconv.Itoa(len(workers)+1), b.worker, "--config", cfg, "--redis", srv.URL())
		workers = append(workers, w)
		return w
	}
	w0, w1 := startWorker(), startWorker()

	child := map[string]any{"agent": "testagent", "params": map[string]any{
		"mode": "echo", "delay_ms": 800, "effects": effects,
		"usage": map[string]int{"prompt_tokens": 60, "completion_tokens": 40, "total_tokens": fanoutChildTokens},
	}}
	params, err := json.Marshal(map[string]any{"mode": "fanout", "n": n, "child": child, "wait_mode": "all", "effects": effects})
	require.NoError(t, err)
	const maxTokens = 2 * n * fanoutChildTokens
	_, err = tasks.NewClient(rdb).Enqueue(ctx, tasks.Task{ID: parent, Agent: "testagent", Params: params, MaxTokens: maxTokens})
	require.NoError(t, err)

	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s.c%d", parent, i+1)
	}
	succeeded := func() int {
		states, err := chaosStates(ctx, rdb, ids)
		if err != nil {
			return 0 // Redis is restarting
		}
		k := 0
		for _, s := range states {
			if s == tasks.StateSucceeded {
				k++
			}
		}
		return k
	}
	poll(t, 90*time.Second, "5 children to succeed", func() bool { return succeeded() >= 5 })
	killWorker(t, w0)
	startWorker()
	poll(t, 90*time.Second, "15 children to succeed", func() bool { return succeeded() >= 15 })
	srv.Stop()
	time.Sleep(time.Second)
	srv.Restart()
	t.Logf("redis restarted on its AOF with %d children succeeded", succeeded())
	poll(t, 90*time.Second, "25 children to succeed", func() bool { return succeeded() >= 25 })
	killWorker(t, w1)
	startWorker()
	t.Logf("worker-1 killed with %d children succeeded", succeeded())

	v := fanoutRecover(t, rdb, parent, startWorker)
	require.Equal(t, tasks.StateSucceeded, v.State, "%s: %s", v.ErrorClass, v.Error)
	checkFanOutParent(t, v, ids)
	childTokens := checkChildrenEndedOnce(t, rdb, ids)
	require.EqualValues(t, n*fanoutChildTokens, childTokens, "each child's usage is its one success's")

	extra := 0
	for _, id := range ids {
		k := len(effectLines(t, effects, id))
		require.GreaterOrEqual(t, k, 1, id)
		extra += k - 1
	}
	tree, err := rdb.HGet(ctx, rkeys.TaskTreeUsage(parent), "tokens").Int64()
	require.NoError(t, err)
	lost := lostTreeDebits(t, workers)
	t.Logf("tree usage %d tokens; children's usage %d; %d extra child agent starts (killed or stranded runs); %d tree debits lost", tree, childTokens, extra, lost)
	// A call's tree debit is its own write as the call ends; one Redis
	// does not take (the restart) is tried again until Redis is back, so
	// none is lost. A debit whose reply the restart cut may count twice
	// (a cap errs on the safe side): one call's worth of slack for the
	// one restart.
	require.Zero(t, lost, "no tree debit is given up")
	require.GreaterOrEqual(t, tree, childTokens, "every recorded call was debited from the tree")
	require.LessOrEqual(t, tree, childTokens+int64((extra+1)*fanoutChildTokens), "the tree was debited only for calls that ran")
	var own int64
	if v.Usage != nil {
		own = v.Usage.TotalTokens
	}
	require.LessOrEqual(t, own+tree, int64(maxTokens), "the tree's budget holds")
}

// lostTreeDebits counts the tree debits the workers' logs say failed.
func lostTreeDebits(t *testing.T, workers []*proc) int {
	t.Helper()
	n := 0
	for _, w := range workers {
		b, err := os.ReadFile(w.log)
		require.NoError(t, err)
		n += strings.Count(string(b), "could not debit the tree's usage")
	}
	return n
}

// killWorker SIGKILLs w's process group and waits for it to die.
func killWorker(t *testing.T, w *proc) {
	t.Helper()
	w.signal(syscall.SIGKILL)
	select {
	case <-w.done:
	case <-time.After(10 * time.Second):
		t.Fatal("a SIGKILLed worker did not die")
	}
}

// fanoutRecover waits for task id to end. Every 15 s that it has not, it
// does what the passage of time would for runs nobody holds (a killed
// worker's, or one a Redis restart stranded in asynq's active set): once
// live workers have extended their leases (every 5 s, to now+30 s), it
// moves the leases nobody extended into the past and starts a worker
// (startWorker), whose lease recovery runs at its start. It returns the
// task's final view.
func fanoutRecover(t *testing.T, rdb *redis.Client, id string, startWorker func() *proc) *tasks.View {
	t.Helper()
	ctx := context.Background()
	st := tasks.NewStore(rdb)
	for round := 0; round < 8; round++ {
		deadline := time.Now().Add(15 * time.Second)
		for time.Now().Before(deadline) {
			if v, err := st.Get(ctx, id); err == nil && v.State.Terminal() {
				return v
			}
			time.Sleep(50 * time.Millisecond)
		}
		now := time.Now()
		stale, err := rdb.ZRangeByScore(ctx, chaosLeaseKey, &redis.ZRangeBy{Min: "-inf", Max: strconv.FormatInt(now.Add(21*time.Second).Unix(), 10)}).Result()
		require.NoError(t, err)
		for _, m := range stale {
			require.NoError(t, rdb.ZAddXX(ctx, chaosLeaseKey, redis.Z{Score: float64(now.Add(-time.Minute).Unix()), Member: m}).Err())
		}
		t.Logf("round %d: %s not ended; %d leases nobody extends (%v): recovering them", round, id, len(stale), stale)
		startWorker()
	}
	return waitStates(t, rdb, []string{id}, 30*time.Second)[id]
}

// checkFanOutParent checks the fan-out parent v: resumed once, by its
// children, with every child's end in spawn order (ids).
func checkFanOutParent(t *testing.T, v *tasks.View, ids []string) {
	t.Helper()
	resumed := 0
	for _, ev := range v.History {
		if ev.Event == tasks.EventResumed {
			resumed++
			require.Equal(t, "children", ev.By)
		}
	}
	require.Equal(t, 1, resumed, "the parent resumed once")
	require.Equal(t, 1, v.Resumes)
	var r fanoutResult
	require.NoError(t, json.Unmarshal(v.Result, &r), string(v.Result))
	require.Equal(t, 1, r.Resume)
	require.Equal(t, len(ids), r.Children)
	require.Equal(t, len(ids), r.Succeeded)
	require.Equal(t, ids, r.IDs, "spawn order")
	require.Len(t, r.Results, len(ids))
	for i, res := range r.Results {
		var echo struct {
			I int `json:"i"`
		}
		require.NoError(t, json.Unmarshal(res, &echo), string(res))
		require.Equal(t, i+1, echo.I, "child %s's result", ids[i])
	}
	require.Equal(t, ids, v.Children)
}

// checkChildrenEndedOnce checks that every child succeeded with exactly
// one terminal event in its history, and returns the sum of their usage.
func checkChildrenEndedOnce(t *testing.T, rdb redis.UniversalClient, ids []string) int64 {
	t.Helper()
	var sum int64
	for id, v := range waitStates(t, rdb, ids, 30*time.Second) {
		require.Equal(t, tasks.StateSucceeded, v.State, "%s: %s: %s", id, v.ErrorClass, v.Error)
		ends := 0
		for _, ev := range v.History {
			switch ev.Event {
			case record.EventSucceeded, record.EventDeadLettered, record.EventTaskCanceled:
				ends++
			}
		}
		require.Equal(t, 1, ends, "%s ended once", id)
		require.NotNil(t, v.Usage, id)
		sum += v.Usage.TotalTokens
	}
	return sum
}

// TestFanOutParentCanceled (#37, "What it must show"): a parent canceled
// while its children run. Real worker processes run the test agent: the
// parent (mode fanout) suspends with 4 children whose agents block
// (sleep forever, ignoring SIGTERM); once every child's agent runs,
// `inspector task cancel` cancels the parent: it reports the children it
// canceled, every child ends canceled, and every child's agent process is
// gone.
func TestFanOutParentCanceled(t *testing.T) {
	t.Parallel()
	const n, parent = 4, "boss"
	b := buildBins(t)
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	cfg := writeConfig(t, fmt.Sprintf(fanoutConfig, n+1, b.agent))
	start(t, "worker", b.worker, "--config", cfg, "--redis", srv.URL())
	effects := filepath.Join(t.TempDir(), "effects")
	child := map[string]any{"agent": "testagent", "params": map[string]any{"mode": "sleep", "ms": -1, "ignore_term": true, "effects": effects}}
	params, err := json.Marshal(map[string]any{"mode": "fanout", "n": n, "child": child})
	require.NoError(t, err)
	_, err = tasks.NewClient(rdb).Enqueue(ctx, tasks.Task{ID: parent, Agent: "testagent", Params: params})
	require.NoError(t, err)

	ids := make([]string, n)
	pids := make([]int, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s.c%d", parent, i+1)
	}
	poll(t, 60*time.Second, "every child's agent to run", func() bool {
		for i, id := range ids {
			lines := effectLines(t, effects, id)
			if len(lines) == 0 {
				return false
			}
			pids[i], err = strconv.Atoi(lines[len(lines)-1][3])
			require.NoError(t, err)
		}
		return true
	})
	st := tasks.NewStore(rdb)
	v, err := st.Get(ctx, parent)
	require.NoError(t, err)
	require.Equal(t, tasks.StateWaiting, v.State)

	out, errOut, code := run(t, "", b.inspector, "--config", cfg, "--redis", srv.URL(), "task", "cancel", parent, "--json")
	require.Equal(t, 0, code, errOut)
	var res struct {
		PreviousState string `json:"previous_state"`
		Children      int    `json:"children"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	require.Equal(t, "waiting", res.PreviousState)
	require.Equal(t, n, res.Children, out)

	views := waitStates(t, rdb, append([]string{parent}, ids...), 30*time.Second)
	for id, v := range views {
		require.Equal(t, tasks.StateCanceled, v.State, id)
	}
	poll(t, 20*time.Second, "every child's agent to be gone", func() bool {
		for _, pid := range pids {
			if !pidGone(pid) {
				return false
			}
		}
		return true
	})
	for _, id := range ids {
		require.Len(t, effectLines(t, effects, id), 1, "%s's agent ran once, and was not run again", id)
	}
}
