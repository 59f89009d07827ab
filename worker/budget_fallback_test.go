package worker

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/budget"
	"github.com/agentq/agentq/tasks"
)

// tokenBackend is a loopback HTTP model backend: each call takes a few
// milliseconds (so that a worker's calls overlap) and reports 100 tokens;
// served counts its calls.
func tokenBackend(t *testing.T, name string) (url string, served *atomic.Int32) {
	t.Helper()
	served = &atomic.Int32{}
	be := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		served.Add(1)
		time.Sleep(20 * time.Millisecond) // a model's latency, not a wait for a condition
		rw.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(rw, `{"model":%q,"usage":{"prompt_tokens":60,"completion_tokens":40,"total_tokens":100}}`, name)
	}))
	t.Cleanup(be.Close)
	return be.URL, served
}

// TestBudgetFallback: agent llm has a budget of 300 tokens (each call
// uses 100) and fallback [cheap]. With budget.fallback, once llm's budget
// is used up the tasks are served by cheap at once — none deferred, one
// attempt each, the served event saying it fell back over llm's budget,
// agentq_fallbacks_total{class="over_budget"} counting them — and llm's
// backend serves at most its budget plus one call per worker slot (the
// stated overshoot). A fallback with a budget of its own serves only
// while that has room; then the tasks wait, their history naming llm's
// budget. Without budget.fallback they wait as before and cheap serves
// none.
func TestBudgetFallback(t *testing.T) {
	t.Parallel()
	const (
		tasksN   = 16
		perCall  = 100
		llmLimit = 300
	)
	tests := []struct {
		name        string
		concurrency int
		fallback    bool
		cheapBudget string // cheap's budget block ("": none)
		cheapLimit  int    // cheap's token budget (0: none)
	}{
		{name: "fallback serves", concurrency: 4, fallback: true},
		{name: "fallback over its own budget", concurrency: 1, fallback: true, cheapBudget: "budget: {tokens: 200, per: 1h}", cheapLimit: 200},
		{name: "no budget fallback: deferred", concurrency: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			llmURL, llmServed := tokenBackend(t, "big-model")
			cheapURL, cheapServed := tokenBackend(t, "small-model")
			w, rdb := runWorker(t, fmt.Sprintf(`
worker: {concurrency: %d}
defaults:
  retry: {max_attempts: 1}
  restart: {max_restarts: 0}
agents:
  llm:
    http: {url: %q}
    fallback: [cheap]
    budget: {tokens: %d, per: 1h, fallback: %t}
  cheap:
    http: {url: %q}
    %s
`, tt.concurrency, llmURL, llmLimit, tt.fallback, cheapURL, tt.cheapBudget))
			c := tasks.NewClient(rdb)
			var ids []string
			for i := range tasksN {
				ids = append(ids, enqueueOne(t, c, fmt.Sprintf("t-%02d", i), "llm"))
			}
			// Every task ends served, or waits deferred over a budget.
			views := map[string]*tasks.View{}
			for _, id := range ids {
				views[id] = waitState(t, rdb, id, 30*time.Second, func(v *tasks.View) bool {
					return v.State.Terminal() || v.State == tasks.StateDeferred
				})
			}
			llmText := fmt.Sprintf(`budget "agent llm" tokens %d/1h0m0s`, llmLimit)
			byLLM, byCheap, deferred := 0, 0, 0
			for id, v := range views {
				if v.State == tasks.StateDeferred {
					deferred++
					require.Zero(t, v.Attempts, "%s: a budget's deferral uses no attempt", id)
					ev := lastEvent(v, tasks.EventDeferred)
					require.NotNil(t, ev, id)
					require.Contains(t, ev.Error, llmText, "%s: the deferral names the agent's budget", id)
					continue
				}
				require.Equal(t, tasks.StateSucceeded, v.State, id)
				require.Equal(t, 1, v.Attempts, id)
				require.Nil(t, lastEvent(v, tasks.EventDeferred), "%s: served without waiting", id)
				ev := lastEvent(v, tasks.EventSucceeded)
				require.NotNil(t, ev, id)
				switch ev.Agent {
				case "llm":
					byLLM++
					require.Empty(t, ev.Fallback, id)
				case "cheap":
					byCheap++
					require.Equal(t, "over_budget: "+llmText, ev.Fallback, "%s: the served event says why it fell back", id)
				default:
					t.Fatalf("%s served by %q", id, ev.Agent)
				}
			}
			require.EqualValues(t, byLLM, llmServed.Load(), "llm's backend served the tasks whose history says llm")
			require.EqualValues(t, byCheap, cheapServed.Load(), "cheap's backend served the tasks whose history says cheap")
			t.Logf("concurrency %d: llm served %d calls (%d tokens of a %d budget), cheap %d, deferred %d",
				tt.concurrency, byLLM, byLLM*perCall, llmLimit, byCheap, deferred)
			// The budget was used up, and overshot by at most one call per slot.
			require.GreaterOrEqual(t, byLLM*perCall, llmLimit)
			require.LessOrEqual(t, byLLM*perCall, llmLimit+tt.concurrency*perCall, "llm's backend served more than its budget plus the overshoot")
			fellBack := counterValue(t, w, "agentq_fallbacks_total", map[string]string{"agent": "llm", "fallback": "cheap", "class": "over_budget"})
			require.EqualValues(t, byCheap, fellBack)

			st, err := budget.New(rdb).Status(context.Background(), budget.Budget{Kind: budget.Agent, Name: "llm", Tokens: llmLimit, Per: time.Hour})
			require.NoError(t, err)
			require.EqualValues(t, byLLM*perCall, st.TokensUsed, "llm's budget is debited only by llm's calls")
			switch {
			case !tt.fallback:
				require.Zero(t, byCheap, "without budget.fallback no task goes to the fallback")
				require.Equal(t, tasksN-byLLM, deferred)
			case tt.cheapLimit == 0:
				require.Zero(t, deferred, "with budget.fallback and a fallback that admits, no task waits")
				require.Equal(t, tasksN-byLLM, byCheap)
			default:
				// concurrency 1: each budget used up exactly, then the tasks wait.
				require.Equal(t, llmLimit/perCall, byLLM)
				require.Equal(t, tt.cheapLimit/perCall, byCheap)
				require.Equal(t, tasksN-byLLM-byCheap, deferred)
				cst, err := budget.New(rdb).Status(context.Background(), budget.Budget{Kind: budget.Agent, Name: "cheap", Tokens: int64(tt.cheapLimit), Per: time.Hour})
				require.NoError(t, err)
				require.EqualValues(t, tt.cheapLimit, cst.TokensUsed)
			}
		})
	}
}
