package broker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/rkeys"
)

// AsynqClient is the redis.UniversalClient the worker's asynq server runs
// on. asynq takes its Redis client from the caller and makes every call
// through it, so AsynqClient passes every call to the real client and
// changes what five of asynq's scripts (recognised by their SHA-1, held to
// asynq's source by asynq_test.go) do around the call:
//
//   - dequeue: it runs the fair dequeue (DequeueLua: the
//     tenants' lanes, weights, caps and priorities; asynq's own dequeue
//     plus one ZRANGE of an empty set for a queue without tenants) instead. When every
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
//     count (ReleaseLua) in one script, and tells Dues
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
				return a.WithDone(ctx, keys, args)
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
		return c.dequeued(ctx, c.fairCall(ctx, fairDequeueScript, keys, args, DequeueKeys(q), c.Fair.DequeueArgs(q)...))
	case sha == forwardSHA && len(keys) == 2 && len(args) == 4:
		return c.forward(ctx, keys, args)
	case sha == retrySHA && len(keys) == 8 && len(args) >= 3:
		cmd := c.fairCall(ctx, retryScript, keys, args, ReleaseKeys(queueOf(keys[1])))
		if cmd.Err() == nil {
			if at, ok := toInt64(args[2]); ok {
				c.dues.Lower(keys[3], at)
			}
		}
		return cmd
	case sha == requeueSHA && len(keys) == 4 && len(args) == 1:
		q := queueOf(keys[2])
		ready, tenants, prefix := LaneKeys(q)
		return c.fairCall(ctx, requeueScript, keys, args, append([]string{ready, tenants}, ReleaseKeys(q)...), prefix)
	case sha == doneSHA && len(keys) == 5:
		return c.fairCall(ctx, doneScript, keys, args, ReleaseKeys(queueOf(keys[0])))
	}
	return run()
}

// doneOf returns the task ID of a call of asynq's done script.
func doneOf(sha string, keys []string, args []any) (string, bool) {
	if sha != doneSHA || len(keys) != 5 || len(args) != 3 {
		return "", false
	}
	id, ok := args[0].(string)
	return id, ok
}

// dequeued follows one queue's dequeue: after a whole round of empty
// queues it waits for a wake-up; after an error it pauses briefly (asynq
// would otherwise retry at once, in a loop, while Redis is down).
func (c *AsynqClient) dequeued(ctx context.Context, cmd *redis.Cmd) *redis.Cmd {
	switch err := cmd.Err(); {
	case err == nil:
		c.empties.Store(0)
	case errors.Is(err, redis.Nil):
		if c.empties.Add(1) >= c.queues {
			c.empties.Store(0)
			cause := c.waiter.Wait(ctx)
			if c.OnWait != nil {
				c.OnWait(cause)
			}
		}
	default:
		c.empties.Store(0)
		c.waiter.Pause(ctx, min(c.waiter.Bound(), errorPause))
	}
	return cmd
}

// errorPause is the pause after a failed dequeue.
const errorPause = 100 * time.Millisecond

// forwardScript is asynq's forwardCmd (asynqForwardSource,
// verbatim but for its reply), which also wakes a worker per task moved
// and replies when the next task of the set is due.
//
// A run whose task hash names a lane (fair.go) goes to its
// lane instead of asynq's pending list.
//
// KEYS[1] the scheduled or retry set, KEYS[2] pending, KEYS[3] the queue's
// wake list (rkeys.Wake; same slot), KEYS[4] the fair ready set, KEYS[5]
// the tenant registry
// ARGV[1..4] asynq's (now Unix s, task key prefix, now Unix ns, group key
// prefix), ARGV[5] the wake list's cap, ARGV[6] the lane prefix
// Returns {moved, earliest score left or -1}.
var forwardScript = redis.NewScript(pushLua + LaneLua + forwardBody())

func forwardBody() string {
	const asynqReply = "return table.getn(ids)"
	const asynqPush = `redis.call("LPUSH", KEYS[2], id)`
	if strings.Count(asynqForwardSource, asynqReply) != 1 || strings.Count(asynqForwardSource, asynqPush) != 1 {
		panic("broker: asynq's forward script no longer has " + asynqPush + " and ends with " + asynqReply)
	}
	src := strings.Replace(asynqForwardSource, asynqPush,
		`agentq_lane_push(KEYS[2], ARGV[6], KEYS[4], KEYS[5], taskKey, id, false)`, 1)
	return strings.Replace(src, asynqReply, `local n = table.getn(ids)
if n > 0 then agentq_wake(KEYS[3], n, tonumber(ARGV[5])) end
local first = redis.call("ZRANGE", KEYS[1], 0, 0, "WITHSCORES")
return {n, first[2] or "-1"}`, 1)
}

// forward is asynq's forward of one delayed set, asked of Redis only when
// a task may be due.
func (c *AsynqClient) forward(ctx context.Context, keys []string, args []any) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	now, ok := toInt64(args[0])
	q := queueOf(keys[1])
	if !ok || q == "" {
		cmd.SetErr(fmt.Errorf("agentq: unexpected arguments of asynq's forward: %v %v", keys, args))
		return cmd
	}
	if !c.dues.Begin(keys[0], now) {
		cmd.SetVal(int64(0))
		return cmd
	}
	ready, tenants, prefix := LaneKeys(q)
	res, err := forwardScript.Run(ctx, c.UniversalClient, []string{keys[0], keys[1], rkeys.Wake(q), ready, tenants},
		args[0], args[1], args[2], args[3], WakeCap, prefix).Slice()
	var moved, next int64
	if err == nil {
		moved, next, err = forwardReply(res)
	}
	c.dues.Done(keys[0], next, err == nil)
	if err != nil {
		cmd.SetErr(err)
		return cmd
	}
	cmd.SetVal(moved)
	return cmd
}

func forwardReply(res []any) (moved, next int64, err error) {
	if len(res) == 2 {
		m, ok1 := toInt64(res[0])
		n, ok2 := toInt64(res[1])
		if ok1 && ok2 {
			return m, n, nil
		}
	}
	return 0, 0, fmt.Errorf("agentq: unexpected reply of the forward script: %v", res)
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
