package delivery

import (
	"context"
	"time"

	"github.com/agentq/agentq/internal/redisx"
	"github.com/agentq/agentq/internal/startstop"
)

// maxRedisWait bounds how long a handler waits for an unreachable Redis
// before it hands the outcome to asynq anyway. asynq's lease lasts 30s and
// cannot be extended while Redis is down; once it expires asynq drops the
// handler's result and leaves the task to its lease recoverer, so waiting
// longer would be useless.
const maxRedisWait = 25 * time.Second

// Backoff between tries while Redis is unreachable.
const (
	redisRetryMin = 50 * time.Millisecond
	redisRetryMax = time.Second
)

// untilRedis runs op and, while it fails because Redis cannot be reached
// or cannot serve it yet (redisx.IsUnavailable: network errors, LOADING,
// READONLY during a failover, …), runs it again with backoff until it succeeds, fails for another reason,
// ctx ends or maxRedisWait passes. It returns op's last error.
//
// Why: a handler that returns to asynq while Redis is down loses its
// outcome twice over. agentq's record of the task (succeeded, dead
// lettered) was not written, and asynq v0.26 cannot acknowledge the task
// later either: its processor hands the failed Done/Retry to its syncer
// with a context it has already canceled, so every later try fails and the
// task stays active until its lease is recovered a minute or two later and
// it runs again. Waiting here for Redis, within the lease, lets both the
// record and asynq's acknowledgement land as soon as Redis is back.
func untilRedis(ctx context.Context, op func() error) error {
	deadline := time.Now().Add(maxRedisWait)
	wait := redisRetryMin
	for {
		err := op()
		if err == nil || !redisx.IsUnavailable(err) || ctx.Err() != nil || time.Now().Add(wait).After(deadline) {
			return err
		}
		if startstop.Sleep(ctx, wait) != nil {
			return err
		}
		wait = min(2*wait, redisRetryMax)
	}
}

// awaitRedis waits (as untilRedis does) until Redis answers a read of task
// id's record, so that what the handler returns next reaches asynq.
func (p *Executor) awaitRedis(ctx context.Context, id string) {
	_ = untilRedis(ctx, func() error {
		return p.rec.ping(context.WithoutCancel(ctx), id)
	})
}
