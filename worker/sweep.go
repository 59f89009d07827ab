package worker

import (
	"context"
	"errors"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/resilience"
	"github.com/agentq/agentq/tasks"
)

// deadLetterWaiting is the deadline sweep's DeadLetterer (package
// internal/deadline): the delivery's dead-lettering of env, past its
// deadline while it waited in state waiting, as a delivery taken past its
// deadline is. A hand-back (Redis trouble) is an error: the sweep's next
// tick tries again.
func (p *pipeline) deadLetterWaiting(ctx context.Context, env *tasks.Envelope, waiting record.State) (bool, error) {
	log := &taskLog{base: p.log, env: env}
	rep := p.report(env, 0, resilience.Timeout, deadlineText(env, "while the task was waiting ("+string(waiting)+")"))
	answer := p.deadLetter(ctx, log, env, rep, ReasonDeadlineExceeded)
	var d *delayed
	if errors.As(answer, &d) {
		return false, errors.New(d.cause)
	}
	return answer == nil, nil
}
