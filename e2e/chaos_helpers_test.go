package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/tasks"
)

// Task kinds of the chaos backend, chosen per task by its params.
const (
	chaosOK    = "ok"    // succeeds at once
	chaosFlaky = "flaky" // 503 on its first "fail" calls, then succeeds
	chaosBad   = "bad"   // 400 invalid_request: dead-lettered after one attempt
)

// chaosParams is what a chaos task carries in its params.
type chaosParams struct {
	Kind string `json:"kind"`
	Fail int    `json:"fail,omitempty"`
	MS   int    `json:"ms,omitempty"` // how long the backend takes to answer
}

// chaosBackend is an HTTP agent backend on loopback that behaves as each
// task's params say and counts, per task ID, the calls it received and the
// successes it answered: a success answered twice is a duplicate side
// effect (at-least-once delivery).
type chaosBackend struct {
	srv       *httptest.Server
	mu        sync.Mutex
	calls     map[string]int
	successes map[string]int
	finals    atomic.Int64 // answers that end a task: successes and 400s
}

func newChaosBackend(t *testing.T) *chaosBackend {
	b := &chaosBackend{calls: map[string]int{}, successes: map[string]int{}}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			TaskID string      `json:"task_id"`
			Params chaosParams `json:"params"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, "bad request: "+err.Error(), http.StatusTeapot)
			return
		}
		if req.Params.MS > 0 {
			time.Sleep(time.Duration(req.Params.MS) * time.Millisecond)
		}
		b.mu.Lock()
		b.calls[req.TaskID]++
		n := b.calls[req.TaskID]
		ok := false
		switch req.Params.Kind {
		case chaosBad:
		case chaosFlaky:
			ok = n > req.Params.Fail
		default:
			ok = true
		}
		if ok {
			b.successes[req.TaskID]++
		}
		b.mu.Unlock()
		switch {
		case req.Params.Kind == chaosBad:
			b.finals.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":{"message":"Invalid 'messages': expected an array","type":"invalid_request_error","code":null}}`)
		case !ok:
			http.Error(w, "Service Unavailable", http.StatusServiceUnavailable)
		default:
			b.finals.Add(1)
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"task":%q,"call":%d}`, req.TaskID, n)
		}
	}))
	t.Cleanup(b.srv.Close)
	return b
}

// duplicates returns the tasks whose success was answered more than once,
// with the number of extra successes.
func (b *chaosBackend) duplicates() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]int{}
	for id, n := range b.successes {
		if n > 1 {
			out[id] = n - 1
		}
	}
	return out
}

func (b *chaosBackend) successCount(id string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.successes[id]
}

// chaosConfig is a worker config with one HTTP agent "llm" at url: short
// backoffs, four attempts a run, a breaker that never opens and quick
// restarts, so that every task ends within seconds.
func chaosConfig(t *testing.T, url string, concurrency int, extraWorker string) string {
	return writeConfig(t, fmt.Sprintf(`
worker: {concurrency: %d, shutdown_timeout: 3s%s}
defaults:
  timeout: 10s
  retry: {max_attempts: 4, initial_backoff: 50ms, max_backoff: 200ms, jitter: 0.1}
  circuit_breaker: {failure_threshold: 1000000, cooldown: 1s}
  restart: {max_restarts: 3, delays: [200ms]}
tenants:
  t2: {concurrency: 4}
agents:
  llm:
    http: {url: %q}
`, concurrency, extraWorker, url))
}

// chaosLine is one enqueuer --file line for a task of agent llm. Tasks
// are spread over four tenants (the default one, t1, t2 capped at 4 by
// chaosConfig, and t3 at high or low priority), so that the chaos runs
// go through the fair dispatch's lanes, caps and their releases.
func chaosLine(id string, p chaosParams) string {
	m := map[string]any{"id": id, "agent": "llm", "action": "chat", "params": p}
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	switch x := h.Sum32() % 8; {
	case x < 2:
	case x < 4:
		m["tenant"] = "t1"
	case x < 6:
		m["tenant"] = "t2"
	default:
		m["tenant"], m["priority"] = "t3", []string{"high", "low"}[x%2]
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// chaosEnqueue runs `enqueuer --file -` with lines and returns the IDs it
// printed (acknowledged) and its exit code.
func chaosEnqueue(t *testing.T, b bins, redisURL string, lines []string) ([]string, int, string) {
	t.Helper()
	out, errOut, code := run(t, strings.Join(lines, "\n")+"\n", b.enqueuer, "--redis", redisURL, "--file", "-")
	return strings.Fields(out), code, errOut
}

// chaosStates reads the state of every task record in a few pipelined round
// trips ("" for a task with no record).
func chaosStates(ctx context.Context, rdb redis.UniversalClient, ids []string) (map[string]tasks.State, error) {
	out := make(map[string]tasks.State, len(ids))
	for start := 0; start < len(ids); start += 500 {
		chunk := ids[start:min(start+500, len(ids))]
		cmds := make([]*redis.StringCmd, len(chunk))
		_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, id := range chunk {
				cmds[i] = p.HGet(ctx, rkeys.Task(id), "state")
			}
			return nil
		})
		if err != nil && err != redis.Nil {
			return nil, err
		}
		for i, id := range chunk {
			s, _ := cmds[i].Result()
			out[id] = tasks.State(s)
		}
	}
	return out, nil
}

// chaosWaitTerminal polls until every task is terminal and returns the
// states; it fails the test after d, naming a few stragglers.
func chaosWaitTerminal(t *testing.T, rdb redis.UniversalClient, ids []string, d time.Duration) map[string]tasks.State {
	t.Helper()
	states, left := chaosPollTerminal(t, rdb, ids, d)
	if len(left) > 0 {
		chaosExplain(t, rdb, left[:min(len(left), 5)])
		t.Fatalf("%d of %d tasks not terminal after %s, e.g. %v", len(left), len(ids), d, left[:min(len(left), 10)])
	}
	return states
}

// chaosPollTerminal polls until every task is terminal or d passes; it
// returns the states and the tasks left ("id=state").
func chaosPollTerminal(t *testing.T, rdb redis.UniversalClient, ids []string, d time.Duration) (map[string]tasks.State, []string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		states, err := chaosStates(context.Background(), rdb, ids)
		if err == nil {
			var left []string
			for _, id := range ids {
				if !states[id].Terminal() {
					left = append(left, fmt.Sprintf("%s=%q", id, states[id]))
				}
			}
			if len(left) == 0 || time.Now().After(deadline) {
				return states, left
			}
		} else if time.Now().After(deadline) {
			t.Fatalf("task states unreadable after %s: %v", d, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// chaosLeaseKey is asynq's lease set of the default queue (member: task
// ID, score: lease expiry in Unix seconds).
var chaosLeaseKey = "asynq:{" + tasks.DefaultQueue + "}:lease"

// chaosWaitOrRecover waits up to d for every task to be terminal. A task
// that Redis moved to asynq's active set just as it went down (the
// dequeue ran, its reply was lost) belongs to no worker: only asynq's
// lease recovery brings it back, 60-120s later (lease 30s, then a 30s
// allowance, on a 1-minute tick). For those, the test does what the
// passage of time would: once every live worker has extended its leases,
// it moves the expiry of leases nobody extends a minute into the past and
// starts a worker (worker args), whose recoverer runs asynq's recovery at
// its start. It returns the states and the number of tasks so recovered.
func chaosWaitOrRecover(t *testing.T, rdb *redis.Client, ids []string, d time.Duration, name, bin string, args ...string) (map[string]tasks.State, int) {
	t.Helper()
	states, left := chaosPollTerminal(t, rdb, ids, d)
	ctx := context.Background()
	insp := asynq.NewInspectorFromRedisClient(rdb)
	if len(left) == 0 {
		// A task whose outcome was recorded just before Redis went away
		// can still lose asynq's acknowledgement (asynq v0.26 retries a
		// failed Done with a cancelled context): it stays in asynq's active
		// set, held by no one, until lease recovery. Give the acks a moment.
		deadline := time.Now().Add(5 * time.Second)
		for {
			qi, err := insp.GetQueueInfo(tasks.DefaultQueue)
			require.NoError(t, err)
			if qi.Active == 0 {
				return states, 0
			}
			if time.Now().After(deadline) {
				t.Logf("%d task(s) terminal in their records but still active in asynq: acknowledgement lost to the outage", qi.Active)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// Live workers extend their leases to now+30s every 5s.
	time.Sleep(7 * time.Second)
	now := time.Now()
	stale, err := rdb.ZRangeByScore(ctx, chaosLeaseKey, &redis.ZRangeBy{Min: "-inf", Max: strconv.FormatInt(now.Add(20*time.Second).Unix(), 10)}).Result()
	require.NoError(t, err)
	chaosExplain(t, rdb, stale)
	for _, id := range stale {
		require.NoError(t, rdb.ZAddXX(ctx, chaosLeaseKey, redis.Z{Score: float64(now.Add(-time.Minute).Unix()), Member: id}).Err())
	}
	t.Logf("%d tasks not terminal after %s; %d of them held by no worker (lease not extended): recovering them through asynq's lease recovery, fast-forwarded",
		len(left), d, len(stale))
	start(t, name, bin, args...)
	states = chaosWaitTerminal(t, rdb, ids, 30*time.Second)
	poll(t, 30*time.Second, "asynq to finish the recovered tasks", func() bool {
		qi, err := insp.GetQueueInfo(tasks.DefaultQueue)
		return err == nil && qi.Pending+qi.Active+qi.Scheduled+qi.Retry == 0
	})
	states, _ = chaosPollTerminal(t, rdb, ids, time.Second)
	return states, len(stale)
}

// chaosExplain logs what asynq and the task store know of a few stragglers
// (given as "id=state").
func chaosExplain(t *testing.T, rdb redis.UniversalClient, left []string) {
	t.Helper()
	insp := asynq.NewInspectorFromRedisClient(rdb)
	st := tasks.NewStore(rdb)
	for _, l := range left {
		id, _, _ := strings.Cut(l, "=")
		info, err := insp.GetTaskInfo(tasks.DefaultQueue, id)
		asynqState := fmt.Sprint(err)
		if err == nil {
			asynqState = fmt.Sprintf("%s retried=%d last_err=%q", info.State, info.Retried, info.LastErr)
		}
		hist := "?"
		if v, err := st.Get(context.Background(), id); err == nil {
			hist = strings.Join(eventNames(v.History), ",")
		}
		t.Logf("task %s: asynq %s; history %s", id, asynqState, hist)
	}
}

// chaosCheckOutcomes asserts that each task ended in the one terminal state
// its kind is designed for: ok and flaky tasks succeeded and are not in the
// dead-letter store, bad tasks are dead-lettered (in the store, with class
// invalid_request) and never succeeded; and that asynq holds none of them
// any more (no task pending, active, scheduled, retrying or archived).
func chaosCheckOutcomes(t *testing.T, rdb redis.UniversalClient, kinds map[string]string, states map[string]tasks.State) {
	t.Helper()
	ctx := context.Background()
	dlqIDs, err := deadletter.NewStore(rdb).IDs(ctx, deadletter.Filter{})
	require.NoError(t, err)
	inDLQ := map[string]bool{}
	for _, id := range dlqIDs {
		inDLQ[id] = true
	}
	st := tasks.NewStore(rdb)
	for id, kind := range kinds {
		switch kind {
		case chaosBad:
			require.Equal(t, tasks.StateDeadLettered, states[id], id)
			require.True(t, inDLQ[id], "%s: dead-lettered but not in the dead-letter store", id)
		default:
			require.Equal(t, tasks.StateSucceeded, states[id], id)
			require.False(t, inDLQ[id], "%s: succeeded and also dead-lettered", id)
		}
	}
	for _, id := range dlqIDs {
		require.Equal(t, chaosBad, kinds[id], "dead letter %s is not a task designed to dead-letter", id)
	}
	// No record holds two different terminal events.
	for id := range kinds {
		v, err := st.Get(ctx, id)
		require.NoError(t, err, id)
		var succ, dead int
		for _, ev := range v.History {
			switch ev.Event {
			case tasks.EventSucceeded:
				succ++
			case tasks.EventDeadLettered:
				dead++
			}
		}
		require.False(t, succ > 0 && dead > 0, "%s both succeeded and dead-lettered: %v", id, eventNames(v.History))
		require.Positive(t, succ+dead, "%s: no terminal event in its history: %v", id, eventNames(v.History))
	}
	qi, err := asynq.NewInspectorFromRedisClient(rdb).GetQueueInfo(tasks.DefaultQueue)
	require.NoError(t, err)
	require.Zero(t, qi.Pending+qi.Active+qi.Scheduled+qi.Retry+qi.Archived,
		"asynq still holds tasks: pending %d active %d scheduled %d retry %d archived %d",
		qi.Pending, qi.Active, qi.Scheduled, qi.Retry, qi.Archived)
	chaosFairDrained(t, rdb, tasks.DefaultQueue)
}

// chaosFairDrained checks that the fair dispatch holds nothing of queue
// once every task ended: no run in a lane, no tenant ready or capped, and
// no in-flight count but those of counted runs still in asynq's active
// list (each release ran with its run's acknowledgement, through crashes
// and restarts).
func chaosFairDrained(t *testing.T, rdb redis.UniversalClient, queue string) {
	t.Helper()
	ctx := context.Background()
	var left []string
	drained := func() bool {
		left = left[:0]
		tenants, err := rdb.SMembers(ctx, rkeys.FairTenants(queue)).Result()
		if err != nil {
			left = append(left, err.Error())
			return false
		}
		for _, tn := range append(tenants, "") {
			for _, p := range []string{"h", "n", "l"} {
				if n := rdb.LLen(ctx, rkeys.FairLane(queue, p, tn)).Val(); n > 0 {
					left = append(left, fmt.Sprintf("lane %s of tenant %q holds %d runs", p, tn, n))
				}
			}
		}
		for _, k := range []string{rkeys.FairReady(queue), rkeys.FairCapped(queue)} {
			if m := rdb.ZRange(ctx, k, 0, -1).Val(); len(m) > 0 {
				left = append(left, fmt.Sprintf("%s holds %v", k, m))
			}
		}
		// The counts match the counted runs still in asynq's active list:
		// after a failover a run can wait there for asynq's lease
		// recovery (a minute or two), which releases its count then.
		want := map[string]string{}
		for _, id := range rdb.LRange(ctx, broker.ActiveKey(queue), 0, -1).Val() {
			if t, err := rdb.HGet(ctx, broker.TaskKey(queue, id), broker.FieldCounted).Result(); err == nil {
				n, _ := strconv.Atoi(want[t])
				want[t] = strconv.Itoa(n + 1)
			}
		}
		if m := rdb.HGetAll(ctx, rkeys.FairInflight(queue)).Val(); !maps.Equal(m, want) {
			left = append(left, fmt.Sprintf("in-flight counts %v, but the counted runs in asynq's active list are %v", m, want))
		}
		return len(left) == 0
	}
	deadline := time.Now().Add(15 * time.Second)
	for !drained() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	require.Empty(t, left, "the fair dispatch of queue %s still holds state after every task ended", queue)
}

// chaosCPUTicks is a process's user+system CPU time in clock ticks (USER_HZ,
// 100 a second on Linux) from /proc/<pid>/stat.
func chaosCPUTicks(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(t, err)
	s := string(b)
	// The command name (field 2) is in parentheses and may hold spaces.
	rest := s[strings.LastIndexByte(s, ')')+2:]
	f := strings.Fields(rest)
	// rest starts at field 3 (state); utime and stime are fields 14 and 15.
	ut, err := strconv.ParseInt(f[11], 10, 64)
	require.NoError(t, err)
	st, err := strconv.ParseInt(f[12], 10, 64)
	require.NoError(t, err)
	return ut + st
}

// chaosUserHZ is the kernel's USER_HZ, the unit of /proc/<pid>/stat CPU times.
const chaosUserHZ = 100

// chaosHTTPStatus GETs url and returns its status code (0 when unreachable).
func chaosHTTPStatus(url string) int {
	c := http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// chaosAlive reports whether the background process has not exited.
func chaosAlive(p *proc) bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// chaosEffect is one line of the testagent's side-effect log.
type chaosEffect struct {
	task             string
	attempt, restart int
	pid              int
	mode             string
}

// chaosReadEffects parses the testagent's side-effect log (missing: none).
func chaosReadEffects(t *testing.T, file string) []chaosEffect {
	t.Helper()
	b, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var out []chaosEffect
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) != 5 {
			continue
		}
		var e chaosEffect
		e.task, e.mode = f[0], f[4]
		e.attempt, _ = strconv.Atoi(f[1])
		e.restart, _ = strconv.Atoi(f[2])
		e.pid, _ = strconv.Atoi(f[3])
		out = append(out, e)
	}
	return out
}
