package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/tasks"
)

// usageBackend is a fake OpenAI-compatible backend on loopback: every
// call is served after delay with a reply reporting perCall tokens of
// usage; it counts the tokens it served per tenant (the params' "t") and
// the most calls in flight at once.
type usageBackend struct {
	srv     *httptest.Server
	mu      sync.Mutex
	served  map[string]int64
	calls   map[string]int
	in, max int
}

func newUsageBackend(t *testing.T, delay time.Duration, perCall int64) *usageBackend {
	b := &usageBackend{served: map[string]int64{}, calls: map[string]int{}}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Params struct {
				T string `json:"t"`
			} `json:"params"`
		}
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusTeapot)
			return
		}
		b.mu.Lock()
		b.in++
		b.max = max(b.max, b.in)
		b.mu.Unlock()
		time.Sleep(delay)
		b.mu.Lock()
		b.in--
		b.served[req.Params.T] += perCall
		b.calls[req.Params.T]++
		b.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if req.Params.T == "capped" {
			// A failure that still used tokens: it counts.
			w.WriteHeader(http.StatusInternalServerError)
		}
		fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`, perCall*7/10, perCall-perCall*7/10, perCall)
	}))
	t.Cleanup(b.srv.Close)
	return b
}

func (b *usageBackend) snapshot() (served map[string]int64, calls map[string]int, maxIn int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	served, calls = map[string]int64{}, map[string]int{}
	for k, v := range b.served {
		served[k] = v
	}
	for k, v := range b.calls {
		calls[k] = v
	}
	return served, calls, b.max
}

// TestBudgetFleetWide: 4 worker processes share tenant acme's budget of
// 50,000 tokens per hour. The backend serves acme no more than the budget
// plus the stated overshoot (the calls in flight when the budget ran out,
// at most every worker slot's, each perCall tokens). "In flight" is from
// a call's admission to its debit, which begins before the backend sees
// the request and ends after it has answered (the reply is read, parsed
// and debited by a worker that may wait for a CPU): the backend's own
// count of concurrent requests is smaller, and is not a bound (a run saw 7
// calls in flight for the budget while the backend never held more than
// 6 at once: 57,000 served). The bound is the fleet's slots; acme's other tasks
// wait, deferred with no attempt used and their history naming the
// budget; tenant globex, enqueued with them, is not slowed: every one of
// its tasks succeeds on its first attempt, never deferred. A task with
// max_tokens 2500 whose attempts fail after using 1000 tokens each is
// dead-lettered budget_exhausted after its third attempt: the fourth,
// which would go over its cap, is not made.
func TestBudgetFleetWide(t *testing.T) {
	t.Parallel()
	const (
		budgetTokens = 50000
		perCall      = 1000
		workers      = 4
		conc         = 4
		nAcme        = 90
		nGlobex      = 20
	)
	b := buildBins(t)
	srv := redistest.Start(t)
	rdb := srv.Client()
	be := newUsageBackend(t, 20*time.Millisecond, perCall)
	cfg := writeConfig(t, fmt.Sprintf(`
worker: {concurrency: %d, shutdown_timeout: 5s}
defaults:
  timeout: 10s
  retry: {max_attempts: 10, initial_backoff: 10ms, max_backoff: 10ms}
tenants:
  acme: {budget: {tokens: %d, per: 1h}}
agents:
  llm:
    http: {url: %q}
`, conc, budgetTokens, be.srv.URL+"/v1/chat/completions"))
	ops := make([]string, workers)
	for i := range ops {
		ops[i] = freeAddr(t)
		start(t, fmt.Sprintf("worker-%d", i), b.worker, "--config", cfg, "--redis", srv.URL(), "--http", ops[i])
	}
	for _, o := range ops {
		waitHTTP(t, "http://"+o+"/readyz", 20*time.Second)
	}

	c := tasks.NewClient(rdb)
	ctx := context.Background()
	var acme, globex []string
	for i := range max(nAcme, nGlobex) {
		for _, tn := range []string{"acme", "globex"} {
			if (tn == "acme" && i >= nAcme) || (tn == "globex" && i >= nGlobex) {
				continue
			}
			res, err := c.Enqueue(ctx, tasks.Task{ID: fmt.Sprintf("%s-%03d", tn, i), Agent: "llm", Tenant: tn,
				Params: json.RawMessage(fmt.Sprintf(`{"t":%q}`, tn))})
			require.NoError(t, err)
			if tn == "acme" {
				acme = append(acme, res.ID)
			} else {
				globex = append(globex, res.ID)
			}
		}
	}

	capped, err := c.Enqueue(ctx, tasks.Task{ID: "capped", Agent: "llm", Tenant: "capped", MaxTokens: 2500,
		Params: json.RawMessage(`{"t":"capped"}`)})
	require.NoError(t, err)

	for id, v := range waitStates(t, rdb, globex, 90*time.Second) {
		require.Equal(t, tasks.StateSucceeded, v.State, "task %s", id)
		require.Equal(t, 1, v.Attempts, "task %s", id)
		require.Nil(t, lastEventOf(v, "deferred"), "task %s of the other tenant was deferred", id)
	}

	// Every acme task either ran or waits for the budget.
	st := tasks.NewStore(rdb)
	deadline := time.Now().Add(90 * time.Second)
	var succeeded, deferred int
	for {
		succeeded, deferred = 0, 0
		var other []string
		for _, id := range acme {
			v, err := st.Get(ctx, id)
			require.NoError(t, err)
			switch {
			case v.State == tasks.StateSucceeded:
				succeeded++
			case v.State == tasks.StateDeferred:
				ev := lastEventOf(v, "deferred")
				require.NotNil(t, ev, "task %s", id)
				require.Contains(t, ev.Error, `budget "tenant acme" tokens 50000/1h0m0s`, "task %s", id)
				require.Zero(t, v.Attempts, "task %s: a budget's deferral uses no attempt", id)
				deferred++
			default:
				other = append(other, id+"="+string(v.State))
			}
		}
		if len(other) == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "acme tasks neither succeeded nor deferred: %s", strings.Join(other, " "))
		time.Sleep(50 * time.Millisecond)
	}
	served, calls, maxIn := be.snapshot()
	overshoot := int64(workers*conc) * perCall
	t.Logf("acme: %d tokens served in %d calls (%d tasks succeeded, %d deferred); at most %d calls at the backend at once; bound %d",
		served["acme"], calls["acme"], succeeded, deferred, maxIn, budgetTokens+overshoot)
	require.LessOrEqual(t, maxIn, workers*conc)
	require.LessOrEqual(t, served["acme"], budgetTokens+overshoot, "the budget plus the calls in flight when it ran out")
	require.GreaterOrEqual(t, served["acme"], int64(budgetTokens), "the budget was used in full before tasks waited")
	require.Equal(t, succeeded, calls["acme"], "one call per task that ran")
	require.Positive(t, deferred, "the rest of acme's tasks wait")
	require.Equal(t, int64(nGlobex*perCall), served["globex"])

	v := waitStates(t, rdb, []string{capped.ID}, 60*time.Second)[capped.ID]
	require.Equal(t, tasks.StateDeadLettered, v.State)
	require.Equal(t, "budget_exhausted", v.Reason)
	require.Contains(t, v.Error, "max_tokens 2500 (used 3000)")
	require.Equal(t, 3, v.Attempts)
	_, calls, _ = be.snapshot()
	require.Equal(t, 3, calls["capped"], "no call after the cap was reached")
}

// lastEventOf returns the last history event of v named name (nil: none).
func lastEventOf(v *tasks.View, name string) *tasks.Event {
	for i := len(v.History) - 1; i >= 0; i-- {
		if string(v.History[i].Event) == name {
			return &v.History[i]
		}
	}
	return nil
}
