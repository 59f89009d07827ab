package delivery

import (
	"context"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/wakeup"
	"github.com/agentq/agentq/tasks"
)

// completer is the pipeline's one way to the task record (river's job
// completer): every write is record.Store.Apply's checked write, waiting
// out a Redis outage (untilRedis), and its answer is a record.Outcome that
// the pipeline turns into its answer to asynq in one place (answer). The
// pipeline never looks at the record's run or state itself.
//
// Two completers, chosen once per worker (newCompleter): inlineCompleter
// writes each change when it is made; ackCompleter (ack.go) also lets a
// success ride asynq's acknowledgement of its delivery.
type completer interface {
	// apply writes c for d.
	apply(ctx context.Context, d record.Delivery, c record.Change) (record.Outcome, error)
	// succeed writes the success c for d, or leaves it to ride asynq's
	// ack of the delivery (rode: then it answers Applied at once, and the
	// write reports what it finds itself, see ack.go).
	succeed(ctx context.Context, d record.Delivery, c record.Change) (out record.Outcome, rode bool, err error)
	// runState reads what a redelivery needs to know of its record.
	runState(ctx context.Context, id string) (record.RunState, error)
	// view reads the record and its history (a dead letter's copy).
	view(ctx context.Context, id string) (*record.View, error)
	// ping reads the record's existence: it fails while Redis is away.
	ping(ctx context.Context, id string) error
	// output appends live output events of d's call (record.Store.Output):
	// one try, not waiting out a Redis outage (output.go).
	output(ctx context.Context, d record.Delivery, evs []record.Event) (record.Outcome, int, error)
}

// inlineCompleter writes every change through the record store when it is
// made, waiting out a Redis outage.
type inlineCompleter struct{ rec *record.Store }

func (c inlineCompleter) apply(ctx context.Context, d record.Delivery, ch record.Change) (out record.Outcome, err error) {
	err = untilRedis(ctx, func() error {
		out, err = c.rec.Apply(context.WithoutCancel(ctx), d, ch)
		return err
	})
	return out, err
}

func (c inlineCompleter) succeed(ctx context.Context, d record.Delivery, ch record.Change) (record.Outcome, bool, error) {
	out, err := c.apply(ctx, d, ch)
	return out, false, err
}

func (c inlineCompleter) runState(ctx context.Context, id string) (record.RunState, error) {
	return c.rec.RunState(ctx, id)
}

func (c inlineCompleter) view(ctx context.Context, id string) (*record.View, error) {
	return c.rec.Get(ctx, id)
}

func (c inlineCompleter) output(ctx context.Context, d record.Delivery, evs []record.Event) (record.Outcome, int, error) {
	return c.rec.Output(ctx, d, evs)
}

func (c inlineCompleter) ping(ctx context.Context, id string) error {
	_, err := c.rec.Exists(ctx, id)
	return err
}

// newCompleter returns the worker's completer: ackCompleter where a
// success may ride asynq's ack (acks is not nil, see newAcks), else
// inlineCompleter.
func newCompleter(rec *record.Store, acks *wakeup.Acks, p *Executor) completer {
	in := inlineCompleter{rec: rec}
	if acks == nil {
		return in
	}
	return &ackCompleter{inlineCompleter: in, p: p}
}

// delivery is the record's view of env's delivery with attempt number n
// (asynq's count of the run's failed deliveries, plus one).
func delivery(env *tasks.Envelope, n int) record.Delivery {
	return record.Delivery{ID: env.ID, Run: env.Run, Restarts: env.Restarts, Attempt: n, Seed: env.Seed()}
}

// answer is ProcessTask's answer for a write that was not applied: out
// says why, or err that Redis stayed away (the task goes back to its
// queue a second later without using an attempt; nothing is lost).
func (p *Executor) answer(ctx context.Context, log *taskLog, env *tasks.Envelope, out record.Outcome, err error) error {
	switch {
	case err != nil:
		log.Error("could not write the task record; task put back", "err", err)
		p.awaitRedis(ctx, env.ID)
		return handBack(err)
	case out == record.Stale:
		log.Info("dropping stale delivery of a superseded run; its outcome, if it ran, is not recorded", "run", env.Run)
	case out == record.Ended:
		log.Warn("acking a delivery of a run that has already ended; its outcome is not recorded again", "run", env.Run)
	case out == record.Canceled:
		return p.canceled(ctx, log, env)
	}
	return nil
}

// applied reports whether a write was applied.
func applied(out record.Outcome, err error) bool { return err == nil && out == record.Applied }
