package delivery

import (
	"context"
	"fmt"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/tasks"
)

// ProcessTask implements asynq.Handler: one delivery, from its payload to
// its answer. It never panics on a task and returns an error only to ask
// asynq for a (possibly free) retry (end.go).
func (p *Executor) ProcessTask(ctx context.Context, t *asynq.Task) (err error) {
	growStack()
	defer p.recoverPanic(&err)
	return toAsynq(p.execute(ctx, t))
}

// execute takes one delivery through its steps, one file each:
//
//	decode and resolve (here) → admission: redelivery, deadline, budgets,
//	breaker, limits (admit.go) → the attempt: its start, calls and
//	fallbacks (attempt.go) → the decision and its step: succeed | retry |
//	requeue | restart | dead letter (settle.go), each ending in end.go.
//
// Its answer is ProcessTask's, before toAsynq.
func (p *Executor) execute(ctx context.Context, t *asynq.Task) error {
	env, derr := tasks.Decode(t.Payload())
	if derr != nil {
		return p.deadLetterPayload(ctx, t, env, derr)
	}
	forgetAck(ctx)
	if m := metaOf(ctx); p.track != nil && m.ok {
		defer p.track(m.id, env.ID, env.Agent, m.queue)()
	}
	p.freeRestartSlot(ctx, env)
	log := &taskLog{base: p.log, env: env}
	sp, ok := p.specs[env.Agent]
	if !ok {
		return p.unknownAgent(ctx, log, env)
	}
	g, answer := p.admitTask(ctx, log, env, sp)
	if g == nil {
		return answer
	}
	a := p.attempt(ctx, log, env, sp, g)
	switch a.kind {
	case attemptNotRun:
		return a.answer
	default: // attemptCalled
		return p.settle(ctx, log, env, sp, a)
	}
}

// recoverPanic turns a panic in the delivery into a retry of the task.
func (p *Executor) recoverPanic(err *error) {
	if r := recover(); r != nil {
		p.log.Error("pipeline panic; task put back", "panic", fmt.Sprint(r))
		*err = retryAfter(time.Second, fmt.Sprintf("panic: %v", r))
	}
}

// freeRestartSlot frees a restart run's slot in the restart index as soon
// as the run is delivered, whatever becomes of it (restart.Scheduler.Started).
func (p *Executor) freeRestartSlot(ctx context.Context, env *tasks.Envelope) {
	if env.Restarts > 0 && env.Run > 0 {
		_ = p.restarts.Started(ctx, env.ID)
	}
}
