package record

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/amount"
	"github.com/agentq/agentq/internal/rkeys"
)

// leanCase is a record's state before a success (set up for task id) and
// the success: whether succeed_acked.lua writes it (lean) or answers
// CodeFull for apply_acked.lua to decide.
type leanCase struct {
	name  string
	setup func(t *testing.T, st *Store, rdb redis.UniversalClient, id string)
	d     Delivery
	c     func() Change
	lean  bool
}

func leanCases() []leanCase {
	ctx := context.Background()
	w1 := Delivery{Attempt: 1, Worker: "w:1", Seed: seed()}
	ok := func() Change { return Succeeded(Attempt{Attempt: 1, Agent: "llm", Worker: "w:1"}, nil) }
	created := func(t *testing.T, st *Store, _ redis.UniversalClient, id string) { create(t, st, id) }
	started := func(worker string) func(t *testing.T, st *Store, rdb redis.UniversalClient, id string) {
		return func(t *testing.T, st *Store, rdb redis.UniversalClient, id string) {
			create(t, st, id)
			require.Equal(t, Applied, apply(t, st, Delivery{ID: id, Attempt: 1, Worker: worker}, Started()))
		}
	}
	used := amount.Usage{Model: "m", InputTokens: 10, OutputTokens: 5, TotalTokens: 15}
	return []leanCase{
		{name: "created", setup: created, d: w1, c: ok, lean: true},
		{name: "started by its worker", setup: started("w:1"), d: w1, c: ok, lean: true},
		{name: "started by another worker (lost)", setup: started("w:0"), d: w1, c: ok},
		{name: "no worker", setup: started("w:0"), d: Delivery{Attempt: 1, Seed: seed()},
			c: func() Change { return Succeeded(Attempt{Attempt: 1}, nil) }, lean: true},
		{name: "after a retry (error cleared)", setup: func(t *testing.T, st *Store, rdb redis.UniversalClient, id string) {
			started("w:1")(t, st, rdb, id)
			a := Attempt{Attempt: 1, ErrorClass: "transient", ClassifiedBy: "status", Error: "reset", Worker: "w:1"}
			require.Equal(t, Applied, apply(t, st, Delivery{ID: id, Attempt: 1, Worker: "w:1"}, Retrying(a, time.Second, t0)))
		}, d: Delivery{Attempt: 2, Worker: "w:2", Seed: seed()},
			c: func() Change { return Succeeded(Attempt{Attempt: 2, Worker: "w:2"}, nil) }, lean: true},
		{name: "watched, with result and usage", setup: func(t *testing.T, st *Store, rdb redis.UniversalClient, id string) {
			create(t, st, id)
			require.NoError(t, st.Watch(ctx, id))
		}, d: w1, c: func() Change {
			return Succeeded(Attempt{Attempt: 1, Usage: used}, json.RawMessage(`{"answer":42}`))
		}, lean: true},
		{name: "result over the cap", setup: created, d: w1, c: func() Change {
			return Succeeded(Attempt{Attempt: 1}, json.RawMessage(`"`+strings.Repeat("x", MaxStoredResult)+`"`))
		}, lean: true},
		{name: "usage added to a sum", setup: func(t *testing.T, st *Store, rdb redis.UniversalClient, id string) {
			started("w:1")(t, st, rdb, id)
			require.Equal(t, Applied, apply(t, st, Delivery{ID: id, Attempt: 1, Worker: "w:1"},
				CallFailed(Attempt{Attempt: 1, ErrorClass: "transient", Usage: used})))
		}, d: w1, c: func() Change { return Succeeded(Attempt{Attempt: 1, Usage: used}, nil) }},
		{name: "lifetime refreshed, with steps and signals", setup: func(t *testing.T, st *Store, rdb redis.UniversalClient, id string) {
			create(t, st, id)
			_, err := st.Step(ctx, Delivery{ID: id, Attempt: 1}, Step{Name: "s1"})
			require.NoError(t, err)
			require.NoError(t, rdb.HSet(ctx, rkeys.Task(id), FieldSignals, 1).Err())
			require.NoError(t, rdb.HSet(ctx, rkeys.TaskSignals(id), "go", "1").Err())
			for _, k := range []string{rkeys.Task(id), rkeys.TaskHistory(id), rkeys.TaskSteps(id), rkeys.TaskSignals(id)} {
				require.NoError(t, rdb.Expire(ctx, k, time.Minute).Err())
			}
		}, d: w1, c: ok, lean: true},
		{name: "history to trim", setup: func(t *testing.T, st *Store, rdb redis.UniversalClient, id string) {
			create(t, st, id)
			for i := range HistoryHead + HistoryTail {
				ev := fmt.Sprintf(`{"seq":%d,"at":"2026-01-02T03:04:05Z","event":"progress","attempt":1,"restart":0}`, i+2)
				require.NoError(t, rdb.RPush(ctx, rkeys.TaskHistory(id), ev).Err())
			}
			require.NoError(t, rdb.HSet(ctx, rkeys.Task(id), FieldSeq, HistoryHead+HistoryTail+1).Err())
		}, d: w1, c: ok, lean: true},
		{name: "restarted run", setup: func(t *testing.T, st *Store, rdb redis.UniversalClient, id string) {
			started("w:1")(t, st, rdb, id)
			a := Attempt{Attempt: 1, ErrorClass: "restartable", Worker: "w:1"}
			require.Equal(t, Applied, apply(t, st, Delivery{ID: id, Attempt: 1, Worker: "w:1"}, Restarting(a, NextRun{Run: 1, Restarts: 1}, 0)))
		}, d: Delivery{Run: 1, Restarts: 1, Attempt: 1, Worker: "w:1", Seed: seed()}, c: ok, lean: true},
		{name: "new run", setup: created, d: Delivery{Run: 2, Restarts: 1, Attempt: 1, Worker: "w:1", Seed: seed()}, c: ok},
		{name: "no record", setup: func(*testing.T, *Store, redis.UniversalClient, string) {}, d: w1, c: ok},
		{name: "deferred", setup: func(t *testing.T, st *Store, rdb redis.UniversalClient, id string) {
			create(t, st, id)
			require.Equal(t, Applied, apply(t, st, Delivery{ID: id, Attempt: 1}, Deferred(Attempt{Attempt: 1}, WaitingBudget, "budget", time.Second)))
		}, d: w1, c: ok},
		{name: "ended", setup: func(t *testing.T, st *Store, rdb redis.UniversalClient, id string) {
			create(t, st, id)
			require.Equal(t, Applied, apply(t, st, Delivery{ID: id, Attempt: 1}, DeadLettered(Attempt{Attempt: 1, ErrorClass: "bad"}, "x")))
		}, d: w1, c: ok},
		{name: "names webhooks", setup: func(t *testing.T, st *Store, rdb redis.UniversalClient, id string) {
			create(t, st, id)
			require.NoError(t, rdb.HSet(ctx, rkeys.Task(id), FieldNotify, "hook").Err())
		}, d: w1, c: ok},
	}
}

// leanState is what a task's success (write ID wid) left: its record,
// history and the lifetimes of its keys (s, rounded), with the task's ID
// replaced, and a write ID of the setup's writes (random) too.
func leanState(t *testing.T, rdb redis.UniversalClient, id, wid string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	for name, key := range map[string]string{"rec": rkeys.Task(id), "hist": rkeys.TaskHistory(id), "steps": rkeys.TaskSteps(id),
		"signals": rkeys.TaskSignals(id)} {
		switch typ := rdb.Type(ctx, key).Val(); typ {
		case "hash":
			m := rdb.HGetAll(ctx, key).Val()
			if w, ok := m[FieldWriteID]; ok && w != wid {
				m[FieldWriteID] = "the setup's"
			}
			b, err := json.Marshal(m)
			require.NoError(t, err)
			out[name] = string(b)
		case "list":
			out[name] = strings.Join(rdb.LRange(ctx, key, 0, -1).Val(), "\n")
		default:
			out[name] = typ
		}
		out[name+" ttl"] = fmt.Sprint(rdb.TTL(ctx, key).Val().Round(10 * time.Second))
	}
	for k, v := range out {
		out[k] = strings.ReplaceAll(v, id, "ID")
	}
	return out
}

// TestSucceedAckedWritesWhatApplyAckedWrites: for every state a record can
// be in when a success comes, the lean write (ApplyAcked's first try,
// succeed_acked.lua) leaves the record, history and lifetimes exactly as
// the checked write (apply_acked.lua) leaves them for the same success,
// or writes nothing and hands the write to it; both acknowledge the
// delivery once. On miniredis and a real redis-server.
func TestSucceedAckedWritesWhatApplyAckedWrites(t *testing.T) {
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, st *Store) {
		ctx := context.Background()
		for i, tc := range leanCases() {
			t.Run(tc.name, func(t *testing.T) {
				lean, full := fmt.Sprint("lean-", i), fmt.Sprint("full-", i)
				c := tc.c()
				results := map[string]Outcome{}
				for _, id := range []string{lean, full} {
					tc.setup(t, st, rdb, id)
					d := tc.d
					d.ID = id
					before := processed(t, rdb)
					done := activeDelivery(t, rdb, id)
					var out Outcome
					var err error
					if id == lean {
						var took bool
						out, took, err = st.succeedAcked(ctx, d, c, done, done.Args)
						require.NoError(t, err)
						require.Equal(t, tc.lean, took, "lean write")
						if !took {
							require.Equal(t, before, processed(t, rdb), "asynq's done did not run")
							out, err = st.ApplyAcked(ctx, d, c, done)
						}
					} else {
						out, err = st.applyAcked(ctx, d, c, done, done.Args)
					}
					require.NoError(t, err)
					results[id] = out
					requireAcked(t, rdb, id)
					require.Equal(t, before+1, processed(t, rdb), "asynq counts the task processed once")
				}
				require.Equal(t, results[full], results[lean])
				require.Equal(t, leanState(t, rdb, full, c.WriteID), leanState(t, rdb, lean, c.WriteID))
			})
		}
	})
}
