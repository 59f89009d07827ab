package broker

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// AsynqClient is the redis.UniversalClient the worker's asynq server runs
// on. asynq takes its Redis client from the caller and makes every call
// through it, so AsynqClient passes every call to the real client and
// changes what five of asynq's scripts (recognised by their SHA-1, held to
// asynq's source by asynq_test.go) do around the call:
//
//   - dequeue: it runs the fair dequeue (lua/dequeue.lua: the
//     tenants' lanes, weights, caps and priorities; asynq's own dequeue,
//     its EXISTS naming the ready set too, for a queue without tenants)
//     instead. When every
//     queue came back empty (one full round of asynq's processor), it
//     waits on the Waiter (a BLPOP on the wake lists, at most the poll
//     interval) before answering asynq, whose own sleep after an empty
//     round is then set to a millisecond. So an idle worker sends one
//     blocking command per poll interval instead of polling, and wakes as
//     soon as a token is pushed.
//   - forward (scheduled and retry sets to pending): it asks Redis only
//     when Dues says a task may be due, or the poll interval has passed,
//     and runs forwardScript instead, which also pushes a wake token per
//     task moved and replies the next due time.
//   - retry: it runs asynq's retry with the release of the run's tenant
//     count (lua/lib/release.lua) in one script, and tells Dues
//     when the retry is due.
//   - requeue (a shutting-down server's unfinished tasks): it puts the
//     run back at the front of its lane (asynq's pending list for the
//     default lane), releases its tenant count and pushes a wake token, so
//     that another worker takes it at once, in one script.
//   - done, when no write rides it: asynq's done with the release.
//   - done (a delivery that succeeded): when its handler left a write to
//     ride the ack (Acks), the write's WithDone runs instead, writing both
//     in one script; any other of asynq's scripts on such a task runs
//     after the write's Alone.
//
// Why no task is stranded: a token is written in the same script as the
// pending entry it announces (or right after, for requeue), and a waiter
// pops it even if it arrived between the empty dequeue round and the
// BLPOP, since the list keeps it. A token that is lost (a failover that
// loses the write, a producer that is not agentq's, a token taken by a
// worker that then found the task gone) delays a task by at most the poll
// interval: every idle worker looks at its queues at least that often, and
// its forwarder checks each delayed set at least that often.
type AsynqClient struct {
	redis.UniversalClient
	waiter  *Waiter
	dues    *Dues
	queues  int64 // how many queues one dequeue round asks
	empties atomic.Int64
	onErr   func(error)
	// OnWait, when set before the server starts, hears why each idle wait
	// ended (the worker's agentq_idle_waits_total).
	OnWait func(Cause)
	// Fair, when set before the server starts, is the fleet's tenant
	// configuration the fair dequeue serves by (fair.go).
	Fair FairConfig
	// Acks, when set before the server starts, holds the writes that ride
	// asynq's acknowledgement of their delivery: asynq's done of such a
	// delivery runs Ack.WithDone instead, and any other of asynq's scripts
	// on the task (a retry, a requeue, …) runs after Ack.Alone.
	Acks *Acks
	// Prefetch, when set before the server starts, makes a done also hand
	// out its queue's next run, which the processor's next dequeue takes
	// without a round trip (prefetch.go); only for a server of one queue.
	Prefetch bool
	pre      prefetch
	waiting  atomic.Bool // the processor is in waiter.Wait (dequeued)
	// dequeues holds each queue's dequeueTail, made at its first dequeue
	// (queue → *dequeueTail).
	dequeues sync.Map
}

// NewAsynqClient wraps rdb for an asynq server that serves nqueues queues.
// onErr (may be nil) hears of failed token pushes.
func NewAsynqClient(rdb redis.UniversalClient, waiter *Waiter, dues *Dues, nqueues int, onErr func(error)) *AsynqClient {
	if onErr == nil {
		onErr = func(error) {}
	}
	return &AsynqClient{UniversalClient: rdb, waiter: waiter, dues: dues, queues: int64(max(nqueues, 1)), onErr: onErr}
}

var (
	dequeueSHA = AsynqDequeueScript.Hash()
	forwardSHA = AsynqForwardScript.Hash()
	retrySHA   = AsynqRetryScript.Hash()
	requeueSHA = AsynqRequeueScript.Hash()
	doneSHA    = AsynqDoneScript.Hash()
)

// EvalSha runs asynq's scripts (Script.Run sends EVALSHA first).
func (c *AsynqClient) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	return c.around(ctx, sha, keys, args, func() *redis.Cmd {
		return c.UniversalClient.EvalSha(ctx, sha, keys, args...)
	})
}

// Eval runs a script Redis did not know (after a NOSCRIPT reply).
func (c *AsynqClient) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	run := func() *redis.Cmd { return c.UniversalClient.Eval(ctx, script, keys, args...) }
	for sha, src := range sources {
		if script == src {
			return c.around(ctx, sha, keys, args, run)
		}
	}
	return run()
}

func (c *AsynqClient) around(ctx context.Context, sha string, keys []string, args []any, run func() *redis.Cmd) *redis.Cmd {
	if c.Acks.Len() > 0 {
		if id, ok := doneOf(sha, keys, args); ok {
			if a := c.Acks.take(id); a != nil {
				q := queueOf(keys[0])
				next := c.next(q)
				cmd := a.WithDone(ctx, keys, args, next)
				c.fetched(ctx, q, next)
				return cmd
			}
		} else if id := taskOf(keys); id != "" {
			if a := c.Acks.take(id); a != nil {
				a.Alone(ctx)
			}
		}
	}
	switch {
	case sha == dequeueSHA && len(keys) == 4 && len(args) == 2:
		q := queueOf(keys[0])
		if cmd, ok := c.takeFetched(ctx, q); ok {
			c.empties.Store(0)
			return cmd
		}
		tail := c.dequeueTail(q)
		dequeue := func() *redis.Cmd { return c.fairCall(ctx, fairDequeueScript, keys, args, tail.keys, tail.args...) }
		return c.dequeued(ctx, q, dequeue(), dequeue)
	case sha == forwardSHA && len(keys) == 2 && len(args) == 4:
		return c.forward(ctx, keys, args)
	case sha == retrySHA && len(keys) == 8 && len(args) >= 3:
		return c.retry(ctx, keys, args)
	case sha == requeueSHA && len(keys) == 4 && len(args) == 1:
		q := queueOf(keys[2])
		ready, tenants, prefix := LaneKeys(q)
		return c.fairCall(ctx, requeueScript, keys, args, append([]string{ready, tenants}, ReleaseKeys(q)...), prefix)
	case sha == doneSHA && len(keys) == 5:
		return c.done(ctx, keys, args)
	}
	return run()
}

func toInt64(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case int:
		return int64(x), true
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			f, ferr := strconv.ParseFloat(x, 64)
			return int64(f), ferr == nil
		}
		return n, true
	}
	return 0, false
}

// sources maps the SHA-1 of each watched script to its source.
var sources = map[string]string{
	dequeueSHA: asynqDequeueSource,
	forwardSHA: asynqForwardSource,
	retrySHA:   asynqRetrySource,
	requeueSHA: asynqRequeueSource,
	doneSHA:    asynqDoneSource,
}
