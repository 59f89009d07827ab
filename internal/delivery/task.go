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

// withMeta gives ctx a delivery of its own: the delivery runs a task
// without an asynq server (tests of its decisions).
func withMeta(ctx context.Context, id, queue string, retried int) context.Context {
	return context.WithValue(ctx, metaKey{}, meta{id: id, queue: queue, retried: retried, ok: true})
}

// FailpointEnv names the environment variable that arms a failpoint.
//
// This is a TEST HOOK. When AGENTQ_FAILPOINT holds the name of a failpoint,
// the worker kills its own process with SIGKILL the moment it reaches that
// point, so crash tests can hit a precise window (for example, between
// scheduling a restart and acknowledging the run to asynq) deterministically.
// It is never set in production; unset, a failpoint costs one environment
// lookup.
//
// Failpoints:
//
//	after_restart_scheduled  in the restart branch of the delivery, after the
//	                         restart is scheduled and the "restarting"
//	                         transition is written, before the handler
//	                         returns (asynq still holds the run's lease)
//	before_restart_recorded  after the restart is scheduled, before its
//	                         "restarting" transition is written
//	after_success_recorded   after a success is written, before asynq's ack
//	before_dead_letter_recorded
//	                         after the dead letter is stored, before the
//	                         task record is marked dead_lettered
//	after_dead_letter_recorded
//	                         after both, before asynq's ack
//	call_started             as an agent call starts, just before the
//	                         runner runs (on a first delivery, before the
//	                         attempt's start is written beginGrace into
//	                         the call)
const FailpointEnv = "AGENTQ_FAILPOINT"
