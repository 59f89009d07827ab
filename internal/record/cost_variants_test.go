package record

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/durx"
	"github.com/agentq/agentq/internal/redistest"
)

// costVariant is one implementation of a worker's quick success (the
// start of a first attempt and its success in one write) whose Redis CPU
// TestScriptCostVariants measures: create writes a fresh record as its
// enqueue would, apply is the write's script call.
type costVariant struct {
	name   string
	script *redis.Script
	create func(ctx context.Context, p redis.Pipeliner, id string)
	args   func(id string) []any
}

// costVariants are the variants compared: the write before the record
// package (tasks.Store.BeginTransition at 2f9cfb9), the checked write as
// it was at 49789cf, and Store.Apply as it is.
func costVariants(st *Store) []costVariant {
	event := func() Event {
		return Event{At: st.now().UTC(), Event: EventSucceeded, Attempt: 1, Agent: "llm", Worker: "w:1"}
	}
	lifetime := durx.CeilSeconds(st.retention)
	keep := lifetime - int64(refreshSlack(st.retention)/time.Second)
	createNow := func(ctx context.Context, p redis.Pipeliner, id string) {
		c := st.CreateCall(New{ID: id, Seed: seed(), State: StatePending})
		p.EvalSha(ctx, c.Script.Hash(), c.Keys, c.Args...)
	}
	vs := []costVariant{{
		name:   "2f9cfb9",
		script: redis.NewScript(mustCostLua("begin_2f9cfb9.lua")),
		create: func(ctx context.Context, p redis.Pipeliner, id string) {
			k := keys(id)
			s := seed()
			p.HSet(ctx, k[0], "id", id, "agent", s.Agent, "action", s.Action, "queue", s.Queue,
				"enqueued_at", s.EnqueuedAt.UTC().Format(time.RFC3339Nano), "correlation_id", s.CorrelationID,
				"state", string(StatePending), "run", "0")
			p.RPush(ctx, k[1], Event{At: st.now().UTC(), Event: EventQueued}.Marshal())
			p.Expire(ctx, k[0], st.retention)
			p.Expire(ctx, k[1], st.retention)
		},
		args: func(string) []any {
			ev := event()
			return []any{0, lifetime, 0, string(ev.Marshal()), keep, "1", 0,
				FieldState, string(StateSucceeded), FieldUpdatedAt, ev.At.Format(time.RFC3339Nano)}
		},
	}, {
		name:   "49789cf",
		script: redis.NewScript(mustCostLua("apply_49789cf.lua")),
		create: createNow,
		args: func(string) []any {
			ev := event()
			return []any{0, newWriteID(), 1, 0, -1, lifetime, keep, string(ev.Marshal()), "0", "1", 0,
				FieldState, string(StateSucceeded), FieldUpdatedAt, ev.At.Format(time.RFC3339Nano)}
		},
	}, {
		name:   "HEAD",
		script: applyScript,
		create: createNow,
		args: func(string) []any {
			return st.write(Succeeded(Attempt{Attempt: 1, Agent: "llm", Worker: "w:1"}, nil)).args(Delivery{Attempt: 1}, false)
		},
	}}
	for _, f := range costExtra {
		vs = append(vs, f(st))
	}
	return vs
}

// costExtra are more variants (a file of experiments adds them).
var costExtra []func(st *Store) costVariant

func mustCostLua(name string) string {
	b, err := os.ReadFile("testdata/cost/" + name)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestScriptCostVariants (RECORD_COST=1): the Redis CPU per call of each
// costVariant, measured in rounds on one redis-server, the variants
// taking turns (in a rotating order) so that a busy machine weighs on all
// of them alike: each turn creates RECORD_COST_BATCH fresh records, resets
// Redis's statistics and writes each record once; the figure is EVALSHA's
// usec per call (the nested commands included), the median over
// RECORD_COST_ROUNDS rounds.
func TestScriptCostVariants(t *testing.T) {
	if os.Getenv("RECORD_COST") == "" {
		t.Skip("RECORD_COST=1 to measure")
	}
	rounds, batch := costEnv("RECORD_COST_ROUNDS", 15), costEnv("RECORD_COST_BATCH", 2000)
	srv := redistest.Start(t)
	rdb := srv.Client()
	st := NewStore(rdb)
	ctx := context.Background()
	vs := costVariants(st)
	require.NoError(t, createScript.Load(ctx, rdb).Err())
	for _, v := range vs {
		require.NoError(t, v.script.Load(ctx, rdb).Err())
	}
	per := make([][]float64, len(vs))
	last := make([]string, len(vs))
	n := 0
	for r := range rounds {
		for j := range vs {
			i := (r + j) % len(vs)
			v := vs[i]
			ids := make([]string, batch)
			for k := range ids {
				ids[k] = fmt.Sprint("c", n)
				n++
			}
			costPipelined(t, rdb, ids, func(p redis.Pipeliner, id string) { v.create(ctx, p, id) })
			require.NoError(t, rdb.ConfigResetStat(ctx).Err())
			costPipelined(t, rdb, ids, func(p redis.Pipeliner, id string) {
				p.EvalSha(ctx, v.script.Hash(), keys(id), v.args(id)...)
			})
			info, err := rdb.Info(ctx, "commandstats").Result()
			require.NoError(t, err)
			usec, calls := costStat(info, "evalsha")
			require.Equal(t, batch, calls, v.name)
			per[i] = append(per[i], usec/float64(calls))
			last[i] = info
		}
	}
	for i, v := range vs {
		s := slices.Clone(per[i])
		slices.Sort(s)
		t.Logf("%-8s evalsha usec/call: median %5.2f  (min %5.2f, 10th percentile %5.2f, max %6.2f; %d rounds of %d)",
			v.name, s[len(s)/2], s[0], s[len(s)/10], s[len(s)-1], rounds, batch)
	}
	for i, v := range vs {
		var nested []string
		for _, l := range strings.Split(last[i], "\n") {
			if strings.HasPrefix(l, "cmdstat_") && !strings.HasPrefix(l, "cmdstat_evalsha") && !strings.HasPrefix(l, "cmdstat_config") {
				name := strings.TrimPrefix(l[:strings.IndexByte(l, ':')], "cmdstat_")
				usec, calls := costStat(l, name)
				nested = append(nested, fmt.Sprintf("%s %.2f×%d", name, usec/float64(calls), calls))
			}
		}
		t.Logf("%-8s last round's nested commands (usec/call×calls): %s", v.name, strings.Join(nested, ", "))
	}
}

// costPipelined runs queue for each id, 100 to a pipeline, and requires no
// errors.
func costPipelined(t *testing.T, rdb *redis.Client, ids []string, queue func(p redis.Pipeliner, id string)) {
	for len(ids) > 0 {
		k := min(100, len(ids))
		p := rdb.Pipeline()
		for _, id := range ids[:k] {
			queue(p, id)
		}
		_, err := p.Exec(context.Background())
		require.NoError(t, err)
		ids = ids[k:]
	}
}

// costStat reads command name's usec and calls from INFO commandstats.
func costStat(info, name string) (usec float64, calls int) {
	for _, l := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(l), "cmdstat_"+name+":")
		if !ok {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "usec":
				usec, _ = strconv.ParseFloat(v, 64)
			case "calls":
				calls, _ = strconv.Atoi(v)
			}
		}
	}
	return usec, calls
}

func costEnv(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}
