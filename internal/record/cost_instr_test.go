package record

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/usage"
)

// TestScriptCostWorkload (RECORD_COST_ADDR=host:port) runs one fixed
// workload of record writes against the redis-server at that address, for
// a measure that a busy machine does not blur: scripts/record-cost.sh
// runs it against a redis-server under valgrind's callgrind and reports
// the instructions the server executed for it (the creates' statistics
// are reset: INFO commandstats after it is the writes' alone).
// RECORD_COST_MODE picks the
// workload, after RECORD_COST_N creates (default 1000): "create" (nothing
// more), "none" (each task's success, no usage), "usage" (each success
// reports usage as BenchmarkUsage's agent does: a model, no price),
// "priced" (the same, priced) or "again" (a failed call with usage, then
// the success with usage: the second adds to the task's sum; both writes
// counted); "reply" and "reply+usage" are "none" and "usage" whose
// success keeps a result, BenchmarkUsage's agent's reply (an OpenAI chat
// completion of 330 bytes). The steps' modes (#37) start each task's
// attempt first: "started" (that start only), "step" (then one step
// reporting priced usage: the task's first), "steps2" (then two: the
// second is a later step's write) and "failed" (then a failed call with
// priced usage: an outcome write of the same shape); a write's cost is the
// difference of two modes.
func TestScriptCostWorkload(t *testing.T) {
	addr := os.Getenv("RECORD_COST_ADDR")
	if addr == "" {
		t.Skip("RECORD_COST_ADDR=host:port to run")
	}
	n := costEnv("RECORD_COST_N", 1000)
	mode := os.Getenv("RECORD_COST_MODE")
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ctx := context.Background()
	st := NewStore(rdb)
	require.NoError(t, rdb.FlushAll(ctx).Err())
	bench := usage.Usage{Model: "gpt-4o-mini", InputTokens: 120, OutputTokens: 30, CachedTokens: 20, TotalTokens: 150}
	priced := bench
	priced.CostUSD, priced.Priced = 0.000345, true
	for i := range n {
		_, err := st.Create(ctx, New{ID: fmt.Sprint("t", i), Seed: seed(), State: StatePending})
		require.NoError(t, err)
	}
	var result json.RawMessage
	if strings.HasPrefix(mode, "reply") {
		result = json.RawMessage(`{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-4o-mini",` +
			`"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],` +
			`"usage":{"prompt_tokens":120,"completion_tokens":30,"total_tokens":150,"prompt_tokens_details":{"cached_tokens":20}}}`)
		mode = strings.TrimPrefix(strings.TrimPrefix(mode, "reply"), "+")
		mode = cmp.Or(mode, "none")
	}
	// The writes' statistics alone (INFO commandstats), for a run on a
	// server not under valgrind.
	require.NoError(t, rdb.ConfigResetStat(ctx).Err())
	for i := range n {
		d := Delivery{ID: fmt.Sprint("t", i), Attempt: 1}
		a := Attempt{Attempt: 1, Agent: "llm", Worker: "w:1"}
		switch mode {
		case "create":
			continue
		case "started", "step", "steps2", "failed":
			stepWorkload(t, st, d, mode, priced)
			continue
		case "none":
		case "usage":
			a.Usage = bench
		case "priced":
			a.Usage = priced
		case "again":
			f := a
			f.ErrorClass, f.Error, f.Usage = "provider_error", "HTTP 500", priced
			_, err := st.Apply(ctx, d, CallFailed(f))
			require.NoError(t, err)
			a.Usage = priced
		default:
			t.Fatalf("RECORD_COST_MODE %q: create, none, usage, priced, again, started, step, steps2 or failed", mode)
		}
		out, err := st.Apply(ctx, d, Succeeded(a, result))
		require.NoError(t, err)
		require.Equal(t, Applied, out)
	}
	if mode == "again" {
		v, err := st.Get(ctx, "t0")
		require.NoError(t, err)
		require.Equal(t, int64(300), v.Usage.TotalTokens)
	}
}

// stepWorkload is TestScriptCostWorkload's writes of a task in the steps'
// modes.
func stepWorkload(t *testing.T, st *Store, d Delivery, mode string, used usage.Usage) {
	ctx := context.Background()
	out, _, err := st.ApplyStart(ctx, d, Started())
	require.NoError(t, err)
	require.Equal(t, Applied, out)
	switch mode {
	case "step", "steps2":
		for i := range map[string]int{"step": 1, "steps2": 2}[mode] {
			ok, err := st.Step(ctx, d, Step{Name: fmt.Sprint("s", i), Data: []byte(`{"outline":["a","b"]}`), Usage: used})
			require.NoError(t, err)
			require.True(t, ok)
		}
	case "failed":
		_, err := st.Apply(ctx, d, CallFailed(Attempt{Attempt: 1, Agent: "llm", Worker: "w:1", ErrorClass: "provider_error", Error: "HTTP 500", Usage: used}))
		require.NoError(t, err)
	}
}
