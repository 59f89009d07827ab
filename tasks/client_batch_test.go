package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
)

// batchOf returns n tasks for agent "tool" with IDs prefix-0 … (or
// generated IDs when prefix is empty).
func batchOf(prefix string, n int) []Task {
	ts := make([]Task, n)
	for i := range ts {
		ts[i] = Task{Agent: "tool", Action: "run", Params: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)), CorrelationID: "corr"}
		if prefix != "" {
			ts[i].ID = fmt.Sprintf("%s-%d", prefix, i)
		}
	}
	return ts
}

// asynqCounts returns asynq's pending and scheduled sizes of the default queue.
func asynqCounts(t *testing.T, rdb redis.UniversalClient) (pending, scheduled int) {
	t.Helper()
	info, err := asynq.NewInspectorFromRedisClient(rdb).GetQueueInfo(DefaultQueue)
	if err != nil && strings.Contains(err.Error(), "does not exist") {
		return 0, 0
	}
	require.NoError(t, err)
	return info.Pending, info.Scheduled
}

// failEnqueueOf is a go-redis hook that fails the commands on asynq task
// keys of the IDs in ids (asynq's enqueue script, pipelined or not) while
// on is set: a Redis failure in the middle of a batch.
type failEnqueueOf struct {
	ids map[string]bool
	on  atomic.Bool
}

func (h *failEnqueueOf) hit(cmd redis.Cmder) bool {
	if !h.on.Load() {
		return false
	}
	for _, a := range cmd.Args() {
		if s, ok := a.(string); ok && strings.HasPrefix(s, "asynq:{"+DefaultQueue+"}:t:") && h.ids[strings.TrimPrefix(s, "asynq:{"+DefaultQueue+"}:t:")] {
			return true
		}
	}
	return false
}

func (h *failEnqueueOf) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *failEnqueueOf) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.hit(cmd) {
			cmd.SetErr(errInjected)
			return errInjected
		}
		return next(ctx, cmd)
	}
}
func (h *failEnqueueOf) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var pass []redis.Cmder
		for _, cmd := range cmds {
			if h.hit(cmd) {
				cmd.SetErr(errInjected)
			} else {
				pass = append(pass, cmd)
			}
		}
		if len(pass) == 0 {
			return errInjected
		}
		return next(ctx, pass)
	}
}

var errInjected = errors.New("injected failure")

func TestEnqueueMany(t *testing.T) {
	t.Parallel()
	for _, b := range redistest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			for _, tc := range []struct {
				name string
				run  func(t *testing.T, rdb redis.UniversalClient, c *Client)
			}{
				{"generated IDs: every task queued with its record", func(t *testing.T, rdb redis.UniversalClient, c *Client) {
					res, err := c.EnqueueMany(ctx, batchOf("", 2500)) // more than one pipeline chunk
					require.NoError(t, err)
					require.Len(t, res, 2500)
					seen := map[string]bool{}
					for _, r := range res {
						require.Len(t, r.ID, 24)
						require.False(t, r.Duplicate)
						require.Equal(t, StatePending, r.State)
						seen[r.ID] = true
					}
					require.Len(t, seen, 2500)
					p, s := asynqCounts(t, rdb)
					require.Equal(t, 2500, p)
					require.Zero(t, s)
					v, err := c.Store().Get(ctx, res[7].ID)
					require.NoError(t, err)
					require.Equal(t, "tool", v.Agent)
					require.Equal(t, "run", v.Action)
					require.Equal(t, StatePending, v.State)
					require.Len(t, v.History, 1)
					require.Equal(t, EventQueued, v.History[0].Event)
				}},
				{"caller IDs are idempotency keys across batches, Enqueue and within a batch", func(t *testing.T, rdb redis.UniversalClient, c *Client) {
					_, err := c.Enqueue(ctx, Task{ID: "k-1", Agent: "tool"})
					require.NoError(t, err)
					ts := batchOf("k", 5)
					ts = append(ts, Task{ID: "k-3", Agent: "other"}) // repeat inside the batch
					res, err := c.EnqueueMany(ctx, ts)
					require.NoError(t, err)
					for i, want := range []bool{false, true, false, false, false, true} {
						require.Equal(t, want, res[i].Duplicate, "task %d", i)
						require.Equal(t, StatePending, res[i].State, "task %d", i)
						require.Equal(t, ts[i].ID, res[i].ID)
					}
					p, _ := asynqCounts(t, rdb)
					require.Equal(t, 5, p)
					v, err := c.Store().Get(ctx, "k-3")
					require.NoError(t, err)
					require.Equal(t, "tool", v.Agent, "the first occurrence wins")

					res, err = c.EnqueueMany(ctx, ts)
					require.NoError(t, err)
					for i := range res {
						require.True(t, res[i].Duplicate, "repeat of task %d", i)
						require.Equal(t, StatePending, res[i].State)
					}
					p, _ = asynqCounts(t, rdb)
					require.Equal(t, 5, p, "a repeated batch enqueues nothing")
					v, err = c.Store().Get(ctx, "k-0")
					require.NoError(t, err)
					require.Len(t, v.History, 1, "a duplicate writes no event")
				}},
				{"an invalid task fails the whole batch, naming its index", func(t *testing.T, rdb redis.UniversalClient, c *Client) {
					ts := batchOf("bad", 4)
					ts[2].Agent = ""
					res, err := c.EnqueueMany(ctx, ts)
					require.Nil(t, res)
					require.ErrorIs(t, err, ErrInvalidEnvelope)
					var te *TaskError
					require.ErrorAs(t, err, &te)
					require.Equal(t, 2, te.Index)
					require.Contains(t, err.Error(), "task 2")
					p, _ := asynqCounts(t, rdb)
					require.Zero(t, p, "nothing is enqueued")
					ok, err := c.Store().Exists(ctx, "bad-0")
					require.NoError(t, err)
					require.False(t, ok)
				}},
				{"delay schedules every task", func(t *testing.T, rdb redis.UniversalClient, c *Client) {
					res, err := c.EnqueueMany(ctx, batchOf("later", 3), ProcessIn(time.Hour))
					require.NoError(t, err)
					for _, r := range res {
						require.Equal(t, StateScheduled, r.State)
					}
					p, s := asynqCounts(t, rdb)
					require.Zero(t, p)
					require.Equal(t, 3, s)
					h, err := c.Store().History(ctx, "later-1")
					require.NoError(t, err)
					require.Equal(t, EventScheduled, h[0].Event)
					require.Equal(t, time.Hour.Milliseconds(), h[0].DelayMS)
				}},
				{"empty batch", func(t *testing.T, _ redis.UniversalClient, c *Client) {
					res, err := c.EnqueueMany(ctx, nil)
					require.NoError(t, err)
					require.Empty(t, res)
				}},
				{"canceled context: nothing enqueued, every task listed", func(t *testing.T, rdb redis.UniversalClient, c *Client) {
					cctx, cancel := context.WithCancel(ctx)
					cancel()
					res, err := c.EnqueueMany(cctx, batchOf("cx", 3))
					require.ErrorIs(t, err, ErrPartialBatch)
					require.ErrorIs(t, err, context.Canceled)
					var be *BatchError
					require.ErrorAs(t, err, &be)
					require.Len(t, be.Failed, 3)
					require.Len(t, res, 3)
					p, _ := asynqCounts(t, rdb)
					require.Zero(t, p)
				}},
				{"concurrent batches of the same IDs queue each once", func(t *testing.T, rdb redis.UniversalClient, c *Client) {
					ts := batchOf("race", 200)
					var wg sync.WaitGroup
					out := make([][]Result, 4)
					errs := make([]error, 4)
					for g := range out {
						wg.Add(1)
						go func() {
							defer wg.Done()
							out[g], errs[g] = c.EnqueueMany(ctx, ts)
						}()
					}
					wg.Wait()
					for _, err := range errs {
						require.NoError(t, err)
					}
					for i := range ts {
						fresh := 0
						for g := range out {
							if !out[g][i].Duplicate {
								fresh++
							}
						}
						require.Equal(t, 1, fresh, "task %d enqueued by exactly one batch", i)
					}
					p, _ := asynqCounts(t, rdb)
					require.Equal(t, 200, p)
				}},
			} {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					rdb, _ := b.New(t)
					tc.run(t, rdb, NewClient(rdb))
				})
			}
		})
	}
}

// TestEnqueueManyPartialFailure fails asynq's enqueue of two tasks in the
// middle of a batch on a real redis-server: the others are queued, the
// error lists exactly the two, and repeating the batch completes it
// without doubling anything.
func TestEnqueueManyPartialFailure(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Start(t).Client()
	hook := &failEnqueueOf{ids: map[string]bool{"p-13": true, "p-40": true}}
	hook.on.Store(true)
	rdb.AddHook(hook)
	c := NewClient(rdb)
	ts := batchOf("p", 64)

	res, err := c.EnqueueMany(ctx, ts)
	require.ErrorIs(t, err, ErrPartialBatch)
	var be *BatchError
	require.ErrorAs(t, err, &be)
	require.Len(t, be.Failed, 2)
	require.Equal(t, 13, be.Failed[0].Index)
	require.Equal(t, "p-13", be.Failed[0].ID)
	require.Equal(t, 40, be.Failed[1].Index)
	require.Len(t, res, 64)
	require.Equal(t, StatePending, res[12].State)
	require.Empty(t, res[13].State, "a failed task has no state")
	p, _ := asynqCounts(t, rdb)
	require.Equal(t, 62, p)
	ok, err := c.Store().Exists(ctx, "p-13")
	require.NoError(t, err)
	require.False(t, ok, "no record for a task that was not queued")

	hook.on.Store(false)
	res, err = c.EnqueueMany(ctx, ts)
	require.NoError(t, err)
	for i, r := range res {
		require.Equal(t, i != 13 && i != 40, r.Duplicate, "task %d", i)
		require.Equal(t, StatePending, r.State)
	}
	p, _ = asynqCounts(t, rdb)
	require.Equal(t, 64, p)
}

// TestAsynqEnqueueManyMatchesAsynq enqueues the same tasks (same IDs, same
// clock) with Enqueue, which goes through asynq.Client, on one server and
// with EnqueueMany, which writes asynq's keys itself, on another, and
// compares everything both wrote, byte for byte: asynq's task hashes,
// queue list or scheduled set, queue registry, and agentq's records.
func TestAsynqEnqueueManyMatchesAsynq(t *testing.T) {
	t.Parallel()
	at := time.Date(2030, 1, 2, 3, 4, 5, 600, time.UTC)
	clock := func() time.Time { return at }
	ts := []Task{
		{ID: "same-1", Agent: "tool", Action: "run", Params: json.RawMessage(`{"a":[1,2,3],"s":"` + strings.Repeat("x", 300) + `"}`), CorrelationID: "c-1"},
		{ID: "same-2", Agent: "tool"},
		{ID: "same-3", Agent: "other", Queue: "critical", Params: json.RawMessage(`{}`)},
	}
	for _, b := range redistest.Backends() {
		for _, tc := range []struct {
			name string
			opts []EnqueueOption
		}{
			{"now", nil},
			{"scheduled", []EnqueueOption{ProcessAt(time.Now().Truncate(time.Second).Add(time.Hour + 500*time.Millisecond))}},
		} {
			t.Run(b.Name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				one, _ := b.New(t)
				many, _ := b.New(t)
				for _, task := range ts {
					_, err := NewClient(one, WithClock(clock)).Enqueue(ctx, task, tc.opts...)
					require.NoError(t, err)
				}
				_, err := NewClient(many, WithClock(clock)).EnqueueMany(ctx, ts, tc.opts...)
				require.NoError(t, err)
				require.Equal(t, dump(t, one), dump(t, many))
				info, err := asynq.NewInspectorFromRedisClient(many).GetTaskInfo("critical", "same-3")
				require.NoError(t, err)
				require.Equal(t, TypeName, info.Type)
				require.Equal(t, asynqMaxRetry, info.MaxRetry)
				env, err := Decode(info.Payload)
				require.NoError(t, err)
				require.Equal(t, "other", env.Agent)
			})
		}
	}
}

var delayMS = regexp.MustCompile(`delay_ms\\*":\d+`)

// dump renders every key of a server with its value (asynq's
// pending_since and the history's delay_ms, times of enqueueing, left out).
func dump(t *testing.T, rdb redis.UniversalClient) map[string]string {
	t.Helper()
	out := redistest.Dump(t, rdb, "pending_since")
	for k, v := range out {
		// A delay is computed from the wall clock (time.Until): not compared.
		out[k] = delayMS.ReplaceAllString(v, "delay_ms")
	}
	return out
}

// TestEnqueueManyScriptCacheMiss runs a batch after SCRIPT FLUSH: the
// records are still written (EVAL fallback).
func TestEnqueueManyScriptCacheMiss(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Start(t).Client()
	c := NewClient(rdb)
	_, err := c.EnqueueMany(ctx, batchOf("a", 2))
	require.NoError(t, err)
	require.NoError(t, rdb.ScriptFlush(ctx).Err())
	_, err = c.EnqueueMany(ctx, batchOf("b", 3))
	require.NoError(t, err)
	for i := range 3 {
		v, err := c.Store().Get(ctx, fmt.Sprintf("b-%d", i))
		require.NoError(t, err)
		require.Equal(t, StatePending, v.State)
	}
}
