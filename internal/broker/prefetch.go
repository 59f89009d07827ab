package broker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Complete-and-fetch-next. asynq's processor asks Redis for a run (its
// dequeue) one at a time, in one goroutine, after a slot frees; the slot
// frees right after the handler's done. So when AsynqClient.Prefetch is
// on, the done of a delivery also hands out the queue's next run in the
// same script (done_next.lua; internal/record's apply_acked when a success
// rides the ack), and the processor's next dequeue is answered from here,
// without a round trip: one script per task instead of two.
//
// What the fetched run is in Redis: exactly what asynq's own dequeue makes
// it (active, leased for asynq's 30 s, its tenant counted). It waits here
// only until the processor's next dequeue, which follows the done at once
// (the slot the done freed); a run still here when the worker shuts down
// is put back at the front of its lane by Drain (asynq's requeue, with the
// release), and one lost with the process is recovered as any leased run
// is, when its lease expires. Prefetch is only for a worker serving one
// queue: with several, asynq's processor chooses the queue (strict or
// weighted), which a done of one queue cannot know.

// Next is a done's request for the next run of its queue, in the same
// script: dequeue.lua's keys and arguments (asynq's four and two, then
// DequeueKeys and FairConfig.DequeueArgs). The script's runner sets Msg
// and ID to the run it handed out ("": none).
type Next struct {
	Keys []string
	Args []any
	Msg  string
	ID   string
}

// SetFetched sets Msg and ID from the reply's message and task ID (a
// string each, or nil/false when the queue had no run to hand out).
func (n *Next) SetFetched(msg, id any) error {
	m, mok := msg.(string)
	i, iok := id.(string)
	switch {
	case mok && iok:
		n.Msg, n.ID = m, i
	case isNone(msg) && isNone(id):
	default:
		return fmt.Errorf("broker: unexpected next run in a done's reply: %v, %v", msg, id)
	}
	return nil
}

// SetFetchedMessage sets Msg to msg, a run's message, and ID to its task
// ID, read from it (MessageID): a reply that carries the message alone.
func (n *Next) SetFetchedMessage(msg string) error {
	id, ok := MessageID([]byte(msg))
	if !ok {
		return fmt.Errorf("broker: the next run's message in a done's reply has no task ID")
	}
	n.Msg, n.ID = msg, id
	return nil
}

func isNone(v any) bool {
	b, ok := v.(bool)
	return v == nil || (ok && !b)
}

// prefetched is a run a done handed out, waiting for the processor's next
// dequeue.
type prefetched struct {
	queue, msg, id string
}

// prefetch holds the runs fetched with a done.
type prefetch struct {
	mu     sync.Mutex
	runs   []prefetched
	closed bool // Drain has run (or begun): no more fetching
}

// maxPrefetched bounds the runs waiting for the processor: each done frees
// one slot the processor fills at once, so more than a few waiting means
// the processor is not taking them (it is stopping).
const maxPrefetched = 64

// next returns the Next a done of queue should carry, or nil when no run
// should be fetched with it: Prefetch off, more than one queue served, the
// worker stopping, or enough runs already waiting.
func (c *AsynqClient) next(queue string) *Next {
	if !c.Prefetch || c.queues != 1 {
		return nil
	}
	c.pre.mu.Lock()
	stop := c.pre.closed || len(c.pre.runs) >= maxPrefetched
	c.pre.mu.Unlock()
	if stop {
		return nil
	}
	tail := c.dequeueTail(queue)
	keys := append([]string{PendingKey(queue), PausedKey(queue), ActiveKey(queue), LeaseKey(queue)}, tail.keys...)
	lease := strconv.FormatInt(time.Now().Add(asynqLease).Unix(), 10)
	args := append([]any{lease, TaskKeyPrefix(queue)}, tail.args...)
	return &Next{Keys: keys, Args: args}
}

// asynqLease is asynq v0.26's lease (rdb.LeaseDuration), which its own
// dequeue gives a run.
const asynqLease = 30 * time.Second

// fetched keeps the run n handed out, if any, for the processor's next
// dequeue (or Drain: no done runs after asynq's server shut down, since
// its shutdown waits for the handlers or abandons them without a done).
func (c *AsynqClient) fetched(ctx context.Context, queue string, n *Next) {
	if n == nil || n.Msg == "" {
		return
	}
	c.pre.mu.Lock()
	c.pre.runs = append(c.pre.runs, prefetched{queue: queue, msg: n.Msg, id: n.ID})
	c.pre.mu.Unlock()
	if c.waiting.Load() { // the processor waits for a token: end its wait
		c.waiter.Nudge(context.WithoutCancel(ctx))
	}
}

// takeFetched answers a dequeue of queue from the runs fetched with a
// done, oldest first; ok is false when none waits.
func (c *AsynqClient) takeFetched(ctx context.Context, queue string) (*redis.Cmd, bool) {
	c.pre.mu.Lock()
	defer c.pre.mu.Unlock()
	for i, r := range c.pre.runs {
		if r.queue == queue {
			c.pre.runs = append(c.pre.runs[:i], c.pre.runs[i+1:]...)
			cmd := redis.NewCmd(ctx)
			cmd.SetVal(r.msg)
			return cmd, true
		}
	}
	return nil, false
}

// Drain stops fetching runs with dones and puts back the runs fetched and
// not handed to asynq (call it once asynq's server has shut down, so that
// its processor takes no more); it returns how many it put back and the
// errors of those it could not (their leases' expiry recovers them).
// Idempotent.
func (c *AsynqClient) Drain(ctx context.Context) (int, error) {
	c.pre.mu.Lock()
	c.pre.closed = true
	runs := c.pre.runs
	c.pre.runs = nil
	c.pre.mu.Unlock()
	var errs []error
	for _, r := range runs {
		if err := c.requeue(ctx, r); err != nil {
			errs = append(errs, err)
		}
	}
	return len(runs) - len(errs), errors.Join(errs...)
}

// StopFetching stops fetching runs with dones (the worker begins to shut
// down: asynq's processor will take no more); Drain puts back those
// already fetched.
func (c *AsynqClient) StopFetching() {
	c.pre.mu.Lock()
	c.pre.closed = true
	c.pre.mu.Unlock()
}

// requeue puts a fetched run back at the front of its lane, as asynq's
// requeue of a shutting-down server's run does (and with the release of
// its tenant count and a wake token: the requeue case of around).
func (c *AsynqClient) requeue(ctx context.Context, r prefetched) error {
	keys := []string{ActiveKey(r.queue), LeaseKey(r.queue), PendingKey(r.queue), TaskKey(r.queue, r.id)}
	cmd := c.around(ctx, requeueSHA, keys, []any{r.id}, func() *redis.Cmd {
		return c.UniversalClient.EvalSha(ctx, requeueSHA, keys, r.id)
	})
	if err := cmd.Err(); err != nil {
		return fmt.Errorf("broker: put back run %s fetched with a done: %w", r.id, err)
	}
	return nil
}
