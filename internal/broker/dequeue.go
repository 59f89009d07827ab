package broker

import (
	"context"
	"errors"
	"math"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/rkeys"
)

// fairDequeueScript is the fair dequeue of one queue, run in place of
// asynq's dequeue (lua/dequeue.lua: asynq's keys and arguments followed
// by DequeueKeys and FairConfig.DequeueArgs; asynq's reply).
var fairDequeueScript = scripts.Script("lib/dequeue.lua", "dequeue.lua")

// DequeueArgs are the arguments dequeue.lua takes after asynq's two: the
// lane prefix, the default stride, the default concurrency, and whether
// the config names tenants.
func (c FairConfig) DequeueArgs(queue string) []any {
	named := "0"
	if len(c.Named) > 0 {
		named = "1"
	}
	return []any{rkeys.FairLanePrefix(queue), c.Default.stride(), c.Default.Concurrency, named}
}

// stride is how far a dispatch advances the tenant's pass:
// 1,000,000/weight rounded, at least 1, as a whole number in decimal
// (dequeue.lua computes the same for a named tenant).
func (s TenantSettings) stride() string {
	return strconv.FormatInt(max(1, int64(math.Floor(1e6/s.weight()+0.5))), 10)
}

// DequeueKeys are the keys dequeue.lua takes after asynq's four.
func DequeueKeys(queue string) []string {
	return []string{rkeys.FairReady(queue), rkeys.FairCapped(queue), rkeys.FairInflight(queue),
		rkeys.FairConf(queue), rkeys.FairState(queue)}
}

// dequeueTail is what dequeue.lua takes after asynq's keys and arguments
// for one queue: DequeueKeys and FairConfig.DequeueArgs, the same for
// every dequeue of the queue (the Fair config is set before the server
// starts), so made once rather than on asynq's one-at-a-time dequeue path.
type dequeueTail struct {
	keys []string
	args []any
}

// dequeueTail returns queue's dequeueTail.
func (c *AsynqClient) dequeueTail(queue string) *dequeueTail {
	if t, ok := c.dequeues.Load(queue); ok {
		return t.(*dequeueTail)
	}
	t, _ := c.dequeues.LoadOrStore(queue, &dequeueTail{keys: DequeueKeys(queue), args: c.Fair.DequeueArgs(queue)})
	return t.(*dequeueTail)
}

// dequeued follows one queue's dequeue: after a whole round of empty
// queues it waits for a wake-up (await); after an error it pauses briefly
// (asynq would otherwise retry at once, in a loop, while Redis is down).
func (c *AsynqClient) dequeued(ctx context.Context, queue string, cmd *redis.Cmd, again func() *redis.Cmd) *redis.Cmd {
	switch err := cmd.Err(); {
	case err == nil:
		c.empties.Store(0)
	case errors.Is(err, redis.Nil):
		if c.empties.Add(1) >= c.queues {
			c.empties.Store(0)
			return c.await(ctx, queue, cmd, again)
		}
	default:
		c.empties.Store(0)
		c.waiter.Pause(ctx, min(c.waiter.Bound(), errorPause))
	}
	return cmd
}

// await waits, after a round of empty queues, for a wake-up, and answers
// asynq's dequeue with empty, or in a worker of one queue with the run
// the wake-up was for: one a done fetched meanwhile, or again's. A token
// whose run is gone (taken without it: by a done's fetch, or by a dequeue
// before the wait) is stale: the worker waits again, up to maxStaleWakes
// times, rather than answer asynq empty, which would cost its sleep after
// an empty round (0.5–1.5 ms) to the next run that comes meanwhile. (At a
// steady 500 runs/s that sleep had most runs: enqueue → start p50 1.1 ms;
// waiting past stale tokens, 0.6 ms.)
func (c *AsynqClient) await(ctx context.Context, queue string, empty *redis.Cmd, again func() *redis.Cmd) *redis.Cmd {
	for stale := 0; ; stale++ {
		c.waiting.Store(true)
		if fetched, ok := c.takeFetched(ctx, queue); ok { // fetched by a done since this round began
			c.waiting.Store(false)
			return fetched
		}
		cause := c.waiter.Wait(ctx)
		c.waiting.Store(false)
		if c.OnWait != nil {
			c.OnWait(cause)
		}
		if cause != Woken || c.queues != 1 {
			return empty
		}
		if fetched, ok := c.takeFetched(ctx, queue); ok {
			return fetched
		}
		if next := again(); !errors.Is(next.Err(), redis.Nil) || stale == maxStaleWakes {
			return next // the run (or an error: asynq logs it and looks again)
		}
	}
}

// maxStaleWakes bounds the stale tokens one dequeue waits past (then it
// answers asynq empty, and asynq sleeps briefly).
const maxStaleWakes = 8

// errorPause is the pause after a failed dequeue.
const errorPause = 100 * time.Millisecond
