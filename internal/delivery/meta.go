package delivery

import (
	"context"

	"github.com/hibiken/asynq"
)

// meta is what asynq tells a handler of the delivery it runs: the
// delivery's asynq task ID, its queue and how many failed deliveries of
// the task came before it.
type meta struct {
	id, queue string
	retried   int
	ok        bool // the context carries a delivery
}

type metaKey struct{}

// metaOf is the delivery ctx carries: asynq's, or one withMeta set.
func metaOf(ctx context.Context) meta {
	if m, ok := ctx.Value(metaKey{}).(meta); ok {
		return m
	}
	id, ok := asynq.GetTaskID(ctx)
	q, _ := asynq.GetQueueName(ctx)
	r, _ := asynq.GetRetryCount(ctx)
	return meta{id: id, queue: q, retried: r, ok: ok}
}

// withMeta gives ctx a delivery of its own: the pipeline runs a task
// without an asynq server (tests of its decisions).
func withMeta(ctx context.Context, id, queue string, retried int) context.Context {
	return context.WithValue(ctx, metaKey{}, meta{id: id, queue: queue, retried: retried, ok: true})
}

// attemptNumber is the delivery's attempt number within its run.
func (m meta) attemptNumber() int { return m.retried + 1 }
