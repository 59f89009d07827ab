package console

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/breaker"
)

// TestBreakersPageShowsTheWindow: a rate-mode breaker's row shows its
// window (the failed and counted calls in it, the failing tasks, its
// length) and when it opens (failure rate, min calls, min failing tasks);
// a consecutive-mode breaker's says its threshold; a key no configured
// agent uses says neither.
func TestBreakersPageShowsTheWindow(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	// Set before the first request (the console reads f.cfg per page).
	llm := f.cfg.Agents["llm"]
	llm.CircuitBreaker = config.Breaker{Mode: config.BreakerModeRate, Window: 45 * time.Second, FailureRate: 0.4, MinCalls: 20, MinFailingTasks: 2}
	f.cfg.Agents["llm"] = llm
	tool := f.cfg.Agents["tool"]
	tool.CircuitBreaker = config.Breaker{Mode: config.BreakerModeConsecutive, FailureThreshold: 4}
	f.cfg.Agents["tool"] = tool

	ctx := context.Background()
	br := breaker.New(f.rdb)
	cfg := breaker.Config{Mode: breaker.ModeRate, Window: 45 * time.Second, FailureRate: 0.4, MinCalls: 20, MinFailingTasks: 2}
	for _, task := range []string{"t1", "t2", "t1"} {
		adm, err := br.Allow(ctx, "llm.example", cfg)
		require.NoError(t, err)
		_, err = br.Record(ctx, "llm.example", cfg, adm, breaker.OutcomeFailure, breaker.ForTask(task))
		require.NoError(t, err)
	}

	require.NoError(t, br.Trip(ctx, "ghost", time.Minute)) // in Redis, used by no configured agent

	r := call(t, "GET", f.url+"/ui/breakers", nil, "Authorization: Bearer "+testToken)
	require.Equal(t, http.StatusOK, r.status, r.body)
	row := rowOf(t, r.body, `data-key="llm.example"`)
	require.Contains(t, row, `<span class="win-counts">3 of 3 calls failed (2 tasks)</span> in the last <span class="win-len">45s</span>`)
	require.Contains(t, row, "opens at 40% of ≥ 20 calls from ≥ 2 tasks")
	require.Contains(t, rowOf(t, r.body, `data-key="tool"`), "consecutive mode: opens after 4 failures in a row")
	require.Contains(t, rowOf(t, r.body, `data-key="ghost"`), `<td class="wrap window" data-label="Window"><div class="win">–</div></td>`, "no configured agent: no mode")
}

// rowOf is the table row of body that starts with attr (a data-key="…").
func rowOf(t *testing.T, body, attr string) string {
	t.Helper()
	_, rest, ok := strings.Cut(body, "<tr "+attr+">")
	require.True(t, ok, "no row %s", attr)
	row, _, _ := strings.Cut(rest, "</tr>")
	return row
}
