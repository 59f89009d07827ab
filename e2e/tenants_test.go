package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/tasks"
)

// tenantCall is one call the tenant backend served.
type tenantCall struct {
	id, tenant, prio string
	start, end       time.Time
}

// tenantBackend is an HTTP agent backend on loopback that takes a fixed
// time per call and records, per call, its task, tenant and priority (from
// the params) and when it started and ended, and the most calls of each
// tenant in flight at once.
type tenantBackend struct {
	srv   *httptest.Server
	mu    sync.Mutex
	calls []tenantCall
	in    map[string]int
	maxIn map[string]int
}

func newTenantBackend(t *testing.T, delay time.Duration) *tenantBackend {
	b := &tenantBackend{in: map[string]int{}, maxIn: map[string]int{}}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			TaskID string `json:"task_id"`
			Params struct {
				T string `json:"t"`
				P string `json:"p"`
			} `json:"params"`
		}
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusTeapot)
			return
		}
		c := tenantCall{id: req.TaskID, tenant: req.Params.T, prio: req.Params.P, start: time.Now()}
		b.mu.Lock()
		b.in[c.tenant]++
		b.maxIn[c.tenant] = max(b.maxIn[c.tenant], b.in[c.tenant])
		b.mu.Unlock()
		time.Sleep(delay)
		c.end = time.Now()
		b.mu.Lock()
		b.in[c.tenant]--
		b.calls = append(b.calls, c)
		b.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok":true}`)
	}))
	t.Cleanup(b.srv.Close)
	return b
}

func (b *tenantBackend) snapshot() ([]tenantCall, map[string]int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := append([]tenantCall(nil), b.calls...)
	m := map[string]int{}
	for k, v := range b.maxIn {
		m[k] = v
	}
	return out, m
}

// tenantLines are enqueuer --file lines for n tasks of tenant at prio,
// IDs "<tenant>-<prio>-<i>".
func tenantLines(tenant, prio string, n int) ([]string, []string) {
	var lines, ids []string
	for i := range n {
		id := fmt.Sprintf("%s-%s-%05d", tenant, prio, i)
		m := map[string]any{"id": id, "agent": "llm", "tenant": tenant, "params": map[string]string{"t": tenant, "p": prio}}
		if prio != "" {
			m["priority"] = prio
		}
		line, _ := json.Marshal(m)
		lines, ids = append(lines, string(line)), append(ids, id)
	}
	return lines, ids
}

// slotsOf counts the runs of tenant in asynq's active list of the default
// queue: the worker slots the tenant holds.
func slotsOf(ctx context.Context, rdb *redis.Client, tenant string) (int, error) {
	ids, err := rdb.LRange(ctx, broker.ActiveKey(tasks.DefaultQueue), 0, -1).Result()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, id := range ids {
		if t, _ := rdb.HGet(ctx, broker.TaskKey(tasks.DefaultQueue, id), broker.FieldCounted).Result(); t == tenant {
			n++
		}
	}
	return n, nil
}

// TestTenantsFairDispatch: three worker processes (concurrency 10) and a
// 50 ms HTTP agent. Tenants A (weight 3) and B (weight 1) are backlogged
// with 6,000 tasks; D is capped at 5, E at 1 with its high tasks enqueued
// after its normal ones. Then tenant C sends 20 tasks while the backlog
// drains:
//   - every C task starts within 2 s of its enqueue;
//   - A's and B's completions stay within 10% of 3:1 over every 5 s window
//     in which both are backlogged;
//   - D never has more than 5 calls in flight at the backend, nor more than
//     5 runs in asynq's active list (its waiting tasks hold no worker slot);
//   - E's high tasks run before its normal ones;
//   - every task succeeds, each called once, and the tenants' in-flight
//     counts are back to nothing at the end.
func TestTenantsFairDispatch(t *testing.T) {
	t.Parallel()
	b := buildBins(t)
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	be := newTenantBackend(t, 50*time.Millisecond)
	cfg := writeConfig(t, fmt.Sprintf(`
worker: {concurrency: 10, shutdown_timeout: 3s}
defaults:
  timeout: 10s
  circuit_breaker: {failure_threshold: 1000000, cooldown: 1s}
tenants:
  A: {weight: 3}
  B: {weight: 1}
  D: {concurrency: 5}
  E: {concurrency: 1}
agents:
  llm:
    http: {url: %q}
`, be.srv.URL))

	var lines, ids []string
	add := func(l, i []string) { lines, ids = append(lines, l...), append(ids, i...) }
	add(tenantLines("A", "", 4500))
	add(tenantLines("B", "", 1500))
	add(tenantLines("D", "", 150))
	add(tenantLines("E", "", 20))
	add(tenantLines("E", "high", 4))
	got, code, errOut := chaosEnqueue(t, b, srv.URL(), lines)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, ids, got)

	for i := range 3 {
		start(t, fmt.Sprintf("worker-%d", i), b.worker, "--config", cfg, "--redis", srv.URL())
	}
	// D's worker slots, sampled until the end.
	stop := make(chan struct{})
	slots := make(chan int, 1)
	go func() {
		most := 0
		for {
			select {
			case <-stop:
				slots <- most
				return
			case <-time.After(20 * time.Millisecond):
			}
			if n, err := slotsOf(ctx, rdb, "D"); err == nil {
				most = max(most, n)
			}
		}
	}()
	poll(t, 60*time.Second, "the backlog to be draining", func() bool { c, _ := be.snapshot(); return len(c) >= 300 })
	cLines, cIDs := tenantLines("C", "", 20)
	got, code, errOut = chaosEnqueue(t, b, srv.URL(), cLines)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, cIDs, got)
	ids = append(ids, cIDs...)

	states := chaosWaitTerminal(t, rdb, ids, 5*time.Minute)
	close(stop)
	mostD := <-slots
	for id, st := range states {
		require.Equal(t, tasks.StateSucceeded, st, id)
	}
	calls, maxIn := be.snapshot()
	perTask := map[string]int{}
	for _, c := range calls {
		perTask[c.id]++
	}
	require.Len(t, perTask, len(ids), "every task was called")
	for id, n := range perTask {
		require.Equal(t, 1, n, "%s called %d times", id, n)
	}

	// C: each starts within 2 s of its enqueue.
	store := tasks.NewStore(rdb)
	byID := map[string]tenantCall{}
	for _, c := range calls {
		byID[c.id] = c
	}
	var waits []time.Duration
	for _, id := range cIDs {
		v, err := store.Get(ctx, id)
		require.NoError(t, err)
		enq, err := time.Parse(time.RFC3339Nano, v.EnqueuedAt)
		require.NoError(t, err)
		waits = append(waits, byID[id].start.Sub(enq))
	}
	sort.Slice(waits, func(i, j int) bool { return waits[i] < waits[j] })
	t.Logf("tenant C's 20 tasks started %v to %v after their enqueue, behind a backlog of %d", waits[0], waits[len(waits)-1], 6000)
	require.Less(t, waits[len(waits)-1], 2*time.Second, "a new tenant's task waits about one dispatch round, not behind the backlog")

	// A:B over every 5 s window where both are backlogged.
	checkShares(t, calls)

	// D's cap, at the backend and in worker slots.
	require.LessOrEqual(t, maxIn["D"], 5, "D's cap at the backend")
	require.Equal(t, 5, maxIn["D"], "D used its cap")
	require.LessOrEqual(t, mostD, 5, "D's waiting tasks hold no worker slot")
	require.Equal(t, 1, maxIn["E"], "E's cap")

	// E: its high tasks went first.
	var eOrder []string
	sort.Slice(calls, func(i, j int) bool { return calls[i].start.Before(calls[j].start) })
	for _, c := range calls {
		if c.tenant == "E" {
			eOrder = append(eOrder, c.prio)
		}
	}
	require.Equal(t, []string{"high", "high", "high", "high"}, eOrder[:4], "E's high tasks overtook its normal ones: %v", eOrder)

	// Nothing left counted or queued.
	poll(t, 10*time.Second, "in-flight counts to drain", func() bool {
		n, _ := rdb.Exists(ctx, rkeys.FairInflight(tasks.DefaultQueue), rkeys.FairReady(tasks.DefaultQueue), rkeys.FairCapped(tasks.DefaultQueue)).Result()
		return n == 0
	})
}

// checkShares checks that A's and B's completions are within 10% of 3:1
// over every 5 s window (1 s apart) in which both had work left.
func checkShares(t *testing.T, calls []tenantCall) {
	t.Helper()
	var first, lastA, lastB time.Time
	for _, c := range calls {
		if first.IsZero() || c.end.Before(first) {
			first = c.end
		}
		switch c.tenant {
		case "A":
			lastA = later(lastA, c.end)
		case "B":
			lastB = later(lastB, c.end)
		}
	}
	from, to := first.Add(time.Second), earlier(lastA, lastB).Add(-time.Second)
	windows := 0
	var worst []string
	for w := from; !w.Add(5 * time.Second).After(to); w = w.Add(time.Second) {
		a, bb := 0, 0
		for _, c := range calls {
			if c.end.Before(w) || !c.end.Before(w.Add(5*time.Second)) {
				continue
			}
			switch c.tenant {
			case "A":
				a++
			case "B":
				bb++
			}
		}
		windows++
		r := float64(a) / float64(max(bb, 1))
		worst = append(worst, fmt.Sprintf("%d:%d", a, bb))
		require.InDelta(t, 3, r, 0.3, "window %d (%d A, %d B) is not within 10%% of 3:1", windows, a, bb)
	}
	require.NotZero(t, windows, "A and B were both backlogged for at least 5 s")
	t.Logf("A:B completions per 5 s window: %s", strings.Join(worst, " "))
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
