package record

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/redisx"
	"github.com/agentq/agentq/internal/rkeys"
)

// TestEnqueueNewMergedWritesWhatEachWrites: EnqueueNewCalls merged into
// one script call (NewMerger) write exactly what the same calls write one
// by one, and what the enqueue script of a caller's ID (EnqueueCall, with
// the queue's registration) writes, for pending and scheduled tasks, the
// default lane and others, with and without a deadline, webhooks, an
// action and a correlation ID (an empty one is left out), consecutive
// tasks of one group (queue, lane, kind) sharing its keys; each gets its
// own reply, a run already queued its stale reply. On both
// backends.
func TestEnqueueNewMergedWritesWhatEachWrites(t *testing.T) {
	t.Parallel()
	for _, be := range redistest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			script, _ := be.New(t)
			single, _ := be.New(t)
			merged, _ := be.New(t)
			now := time.Now()
			clock := WithClock(func() time.Time { return now })
			type task struct {
				n    New
				t    broker.AsynqTask
				lane broker.Lane
			}
			var ts []task
			lanes := []broker.Lane{{}, {Tenant: "acme"}, {Tenant: "acme", Priority: broker.Low}, {Priority: broker.High}}
			// Runs of consecutive tasks share a group (queue, lane, kind):
			// 0–2, 3, 4, 5, 6–8, 9.
			for i := range 10 {
				delay := time.Duration(0)
				if i%5 == 4 {
					delay = 90 * time.Minute
				}
				id := fmt.Sprintf("task-%d", i)
				seed := Seed{Agent: "tool", Action: "run", Queue: []string{"default", "other"}[(i/6)%2], CorrelationID: "c-1",
					EnqueuedAt: now.UTC()}
				if i%2 == 1 { // left out of the record
					seed.Action, seed.CorrelationID = "", ""
				}
				if i%4 == 1 {
					seed.Deadline = now.Add(2 * time.Hour)
					seed.Notify = []string{"ops"}
				}
				n := New{ID: id, Seed: seed, State: StatePending, Delay: delay}
				if delay > 0 {
					n.State = StateScheduled
				}
				ts = append(ts, task{n: n, lane: lanes[(i/3)%len(lanes)], t: broker.AsynqTask{Type: "agentq:task",
					Payload: []byte(`{"id":"` + id + `"}`), ID: id + "#0", Queue: seed.Queue, MaxRetry: 1, Timeout: time.Hour}})
			}
			// The caller's-ID enqueue script, with the registration.
			ss := NewStore(script, clock)
			for _, k := range ts {
				require.NoError(t, script.SAdd(ctx, broker.AllQueues, k.t.Queue).Err())
				c := ss.EnqueueCall(k.n, k.t, k.lane, now)
				code, st, err := EnqueueReply(c.Script.Run(ctx, script, c.Keys, c.Args...).Result())
				require.NoError(t, err)
				require.Equal(t, CodeApplied, code)
				require.Equal(t, k.n.State, st)
			}
			// One by one, through a Batcher (a merge of one).
			b := redisx.NewBatcher(single, redisx.BatchOptions{Linger: -1})
			s1 := NewStore(single, clock)
			for _, k := range ts {
				code, _, err := EnqueueReply(b.RunMerged(ctx, NewMerger, s1.EnqueueNewCall(k.n, k.t, k.lane, now)))
				require.NoError(t, err)
				require.Equal(t, CodeApplied, code)
			}
			// All in one merged call, the first task twice (its run is queued
			// already the second time: stale, nothing more written), task 6
			// enqueued before (stale: its group 6–8 goes task by task).
			sm := NewStore(merged, clock)
			pre := sm.EnqueueNewCall(ts[6].n, ts[6].t, ts[6].lane, now)
			code, _, err := EnqueueReply(pre.Script.Run(ctx, merged, pre.Keys, pre.Args...).Result())
			require.NoError(t, err)
			require.Equal(t, CodeApplied, code)
			calls := []redisx.Call{sm.EnqueueNewCall(ts[0].n, ts[0].t, ts[0].lane, now)}
			for _, k := range ts {
				calls = append(calls, sm.EnqueueNewCall(k.n, k.t, k.lane, now))
			}
			m := NewMerger.Merge(calls)
			groups := 6
			require.Len(t, m.Keys, newCallKeys+groups*newGroupKeys+len(calls)*2, "a group's keys travel once")
			res := NewMerger.Split(redisx.Pipelined(ctx, merged, []redisx.Call{m})[0], len(calls))
			for i, r := range res {
				code, _, err := EnqueueReply(r.Val, r.Err)
				require.NoError(t, err)
				if i == 1 || i == 7 {
					require.Equal(t, CodeStale, code, "call %d: a run queued already", i)
					continue
				}
				require.Equal(t, CodeApplied, code, "call %d", i)
			}
			// The queues' keys alike; the records alike but where the first
			// event is (the record's field, not a history list), which the
			// views read back the same.
			want := withoutRecords(redistest.Dump(t, script))
			require.Equal(t, want, withoutRecords(redistest.Dump(t, single)), "one by one writes what the enqueue script writes")
			require.Equal(t, want, withoutRecords(redistest.Dump(t, merged)), "merged writes what the enqueue script writes")
			for _, k := range ts {
				wantView, err := ss.Get(ctx, k.n.ID)
				require.NoError(t, err)
				require.Len(t, wantView.History, 1)
				for name, st := range map[string]*Store{"one by one": s1, "merged": sm} {
					v, err := st.Get(ctx, k.n.ID)
					require.NoError(t, err)
					require.Equal(t, wantView, v, "%s: task %s reads the same", name, k.n.ID)
					h, err := st.History(ctx, k.n.ID)
					require.NoError(t, err)
					require.Equal(t, wantView.History, h, "%s: task %s's history", name, k.n.ID)
					evs, state, err := st.Events(ctx, k.n.ID, 0)
					require.NoError(t, err)
					require.Equal(t, wantView.History, evs, "%s: task %s's events", name, k.n.ID)
					require.Equal(t, k.n.State, state)
				}
				key := keys(k.n.ID)[0]
				require.InDelta(t, script.TTL(ctx, key).Val().Seconds(), merged.TTL(ctx, key).Val().Seconds(), 2, "%s: the same lifetime", key)
				require.Zero(t, merged.Exists(ctx, keys(k.n.ID)[1]).Val(), "no history list before the second event")
			}
		})
	}
}

// withoutRecords is dump without the task records and their histories.
func withoutRecords(dump map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range dump {
		if !strings.HasPrefix(k, rkeys.Task("")[:len(rkeys.Task(""))-1]) {
			out[k] = v
		}
	}
	return out
}
