package delivery

import (
	"context"
	"errors"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/tasks"
)

// A task canceled on request (tasks.Client.Cancel) has its record marked
// canceled before anything else, and every write of the pipeline to the
// record is then refused (record.Canceled). The pipeline tells such a
// cancel from its own shutdown (both end the delivery's context) by that
// refusal: a shutdown's put-back is recorded and the task goes back to its
// queue; a canceled task's writes are refused and the delivery is acked —
// not retried, restarted or dead-lettered (and its breaker never counts
// it: a call cut by a context's end is class canceled, OutcomeIgnore).

// canceled is ProcessTask's answer for a delivery of a canceled task: it
// is acked, and its outcome (if its agent ran) is not recorded. When asynq
// ended the delivery's context (CancelProcessing), asynq has already put
// the delivery back for a retry without waiting for this answer: that
// leftover is deleted here (its redelivery would be acked unrun anyway).
func (p *Executor) canceled(ctx context.Context, log *taskLog, env *tasks.Envelope) error {
	log.Info("task canceled: delivery acked, its outcome is not recorded", "event", "canceled", "run", env.Run)
	if ctx.Err() != nil {
		m := metaOf(ctx)
		p.dropLeftover(m.queue, m.id)
	}
	return acked(runCanceled)
}

// leftoverTries and leftoverEvery bound dropLeftover: asynq's processor
// moves a delivery whose context ended to its retry set within moments.
const (
	leftoverTries = 20
	leftoverEvery = 100 * time.Millisecond
)

// dropLeftover deletes asynq task id from queue once asynq has put it
// back (it refuses to delete an active task), trying for up to ~2s in the
// background. Best effort: a leftover that stays is redelivered and acked
// without running (RunState.Ended covers canceled).
func (p *Executor) dropLeftover(queue, id string) {
	if p.insp == nil || queue == "" || id == "" {
		return
	}
	go func() {
		for range leftoverTries {
			time.Sleep(leftoverEvery)
			err := p.insp.DeleteTask(queue, id)
			if err == nil || errors.Is(err, asynq.ErrTaskNotFound) || errors.Is(err, asynq.ErrQueueNotFound) {
				return
			}
		}
	}()
}

// dropRun deletes run (a restart this worker scheduled for a task that was
// canceled meanwhile) from its queue and frees its restart-index slot.
func (p *Executor) dropRun(ctx context.Context, run *tasks.Envelope) {
	if p.insp != nil {
		_ = p.insp.DeleteTask(run.Queue, run.AsynqID())
	}
	_ = p.restarts.Started(context.WithoutCancel(ctx), run.ID)
}
