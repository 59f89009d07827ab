package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redisx"
	"github.com/agentq/agentq/internal/startstop"
	"github.com/agentq/agentq/tasks"
)

// completer is the delivery's one way to the task record (river's job
// completer): every write is record.Store.Apply's checked write, waiting
// out a Redis outage (untilRedis), and its answer is a record.Outcome that
// the delivery turns into its answer to asynq in one place (answer). The
// pipeline never looks at the record's run or state itself.
//
// Two completers, chosen once per worker (newCompleter): inlineCompleter
// writes each change when it is made; ackCompleter (below) also lets a
// success ride asynq's acknowledgement of its delivery.
type completer interface {
	// apply writes c for d.
	apply(ctx context.Context, d record.Delivery, c record.Change) (record.Outcome, error)
	// succeed writes the success c for d, or leaves it to ride asynq's
	// ack of the delivery (rode: then it answers Applied at once, and the
	// write reports what it finds itself, see ackCompleter).
	succeed(ctx context.Context, d record.Delivery, c record.Change) (out record.Outcome, rode bool, err error)
	// runState reads what a redelivery needs to know of its record.
	runState(ctx context.Context, id string) (record.RunState, error)
	// view reads the record and its history (a dead letter's copy).
	view(ctx context.Context, id string) (*record.View, error)
	// ping reads the record's existence: it fails while Redis is away.
	ping(ctx context.Context, id string) error
	// start writes the start of d's attempt (record.Started), waiting
	// out a Redis outage, and, when the record counts steps or signals,
	// reads them (nil when none: a task without them pays no command), and
	// the wait that ended (started).
	start(ctx context.Context, d record.Delivery) (record.Outcome, started, error)
	// wait writes a suspend (record.Waiting) for d: ready is true when the
	// signal it waits for was sent already.
	wait(ctx context.Context, d record.Delivery, c record.Change) (out record.Outcome, ready bool, err error)
	// step records one step of d's call (record.Store.Step), waiting out
	// a Redis outage.
	step(ctx context.Context, d record.Delivery, st record.Step) (bool, error)
	// output appends live output events of d's call (record.Store.Output):
	// one try, not waiting out a Redis outage (outputWriter, attempt.go).
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

func (c inlineCompleter) start(ctx context.Context, d record.Delivery) (out record.Outcome, got started, err error) {
	var info record.StartInfo
	err = untilRedis(ctx, func() error {
		out, info, err = c.rec.ApplyStart(context.WithoutCancel(ctx), d, record.Started())
		return err
	})
	if err != nil || out != record.Applied {
		return out, got, err
	}
	got.wait, got.outcome, got.resumed = waitResult(info), info.WaitOutcome, info.Resumed
	if info.Steps > 0 {
		if got.steps, err = c.read(ctx, d.ID, c.rec.Steps); err != nil {
			return out, got, err
		}
	}
	if info.Signals > 0 {
		if got.signals, err = c.read(ctx, d.ID, c.rec.Signals); err != nil {
			return out, got, err
		}
	}
	if got.wait != nil && got.wait.Kind == agent.WaitChildren {
		got.children, err = c.childEnds(ctx, d.ID)
	}
	return out, got, err
}

// childEnds reads how the children of task id's last children wait
// ended (record.Store.ChildEnds, in spawn order; a child that has not
// ended has its current state), waiting out a Redis outage.
func (c inlineCompleter) childEnds(ctx context.Context, id string) (out []agent.ChildEnd, err error) {
	var ends []record.ChildEnd
	err = untilRedis(ctx, func() error {
		ends, err = c.rec.ChildEnds(context.WithoutCancel(ctx), id)
		return err
	})
	out = make([]agent.ChildEnd, len(ends))
	for i, e := range ends {
		out[i] = agent.ChildEnd{ID: e.ID, Name: e.Name, State: string(e.State), Result: e.Result, ErrorClass: e.ErrorClass, Error: e.Error}
	}
	return out, err
}

// read reads task id's steps or signals (Store.Steps, Store.Signals: f),
// waiting out a Redis outage.
func (c inlineCompleter) read(ctx context.Context, id string,
	f func(context.Context, string) (map[string]json.RawMessage, error)) (m map[string]json.RawMessage, err error) {
	err = untilRedis(ctx, func() error {
		m, err = f(context.WithoutCancel(ctx), id)
		return err
	})
	return m, err
}

// wait writes a suspend (record.Waiting) for d, waiting out a Redis
// outage, and answers whether the signal it waits for was sent already.
func (c inlineCompleter) wait(ctx context.Context, d record.Delivery, ch record.Change) (out record.Outcome, ready bool, err error) {
	var info record.StartInfo
	err = untilRedis(ctx, func() error {
		out, info, err = c.rec.ApplyStart(context.WithoutCancel(ctx), d, ch)
		return err
	})
	return out, info.SignalReady, err
}

// started is what the start of a later run's attempt read (beginNow):
// the task's steps and signals (nil when none), the children of a
// children wait that ended (in spawn order), and the wait that ended
// (nil when the task never suspended) with what ended it; resumed: this
// start decided it (the resumed run's first).
type started struct {
	steps, signals map[string]json.RawMessage
	wait           *agent.WaitResult
	children       []agent.ChildEnd
	outcome        string
	resumed        bool
}

// waitResult is the agent's view of the record's last wait (info.Wait;
// nil when none, or while it has not ended).
func waitResult(info record.StartInfo) *agent.WaitResult {
	if info.Wait == nil || info.WaitOutcome == "" {
		return nil
	}
	var w struct {
		Kind   string `json:"kind"`
		Signal string `json:"signal"`
	}
	_ = json.Unmarshal(info.Wait, &w)
	return &agent.WaitResult{Kind: w.Kind, Signal: w.Signal, TimedOut: info.WaitOutcome == record.WaitTimeout}
}

func (c inlineCompleter) step(ctx context.Context, d record.Delivery, st record.Step) (ok bool, err error) {
	err = untilRedis(ctx, func() error {
		ok, err = c.rec.Step(context.WithoutCancel(ctx), d, st)
		return err
	})
	return ok, err
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
func newCompleter(rec *record.Store, acks *broker.Acks, stopping *atomic.Bool, done *successes) completer {
	in := inlineCompleter{rec: rec}
	if acks == nil {
		return in
	}
	return &ackCompleter{inlineCompleter: in, stopping: stopping, done: done}
}

// delivery is the record's view of env's delivery with attempt number n
// (asynq's count of the run's failed deliveries, plus one).
func delivery(env *tasks.Envelope, n int) record.Delivery {
	return record.Delivery{ID: env.ID, Run: env.Run, Restarts: env.Restarts, Attempt: n, Seed: record.SeedOf(env)}
}

// A quick success's record write rides asynq's acknowledgement of the
// delivery. The handler leaves the write in the worker's broker.Acks and
// returns to asynq at once; asynq's done of the delivery then runs the
// record write and asynq's own script as one (record.Store.ApplyAcked),
// so a task costs Redis one script call fewer and its record and its ack
// land together. What keeps it safe:
//
//   - Only a delivery whose handler returns no error with its context
//     still live leaves a write: asynq then calls done at once, unless
//     the delivery's lease was lost (the task runs again elsewhere, as it
//     would have anyway). If the context ends as the handler returns,
//     asynq may answer with a retry instead: the AsynqClient then writes
//     the success first (Ack.Alone), and the retry finds the run ended.
//   - The wait-out of a Redis outage (untilRedis) runs in the hook, within
//     asynq's done, so the record and the ack land when Redis is back.
//   - A new delivery of the task drops a write an earlier one left
//     (Acks.Forget), so a write never rides another delivery's ack.
//   - Once the worker shuts down, successes are written before the
//     handler returns, as before (asynq may abandon a delivery at its
//     shutdown deadline without acking it); writes still waiting when
//     the worker has stopped run alone (Acks.Drain).
//   - Only on the worker's own asynq server (Run puts the Acks in the
//     tasks' base context), not on a Redis Cluster (asynq's keys and the
//     record are in different slots), not with redis.wait_replicas (the
//     record write then goes through the worker's batcher, which WAITs for
//     the replicas), and not while the crash test hook
//     after_success_recorded is armed (there is no gap to crash in).

type acksKey struct{}

// withAcks is the base context of the worker's own asynq server.
func withAcks(ctx context.Context, acks *broker.Acks) context.Context {
	if acks == nil {
		return ctx
	}
	return context.WithValue(ctx, acksKey{}, acks)
}

// acksOf returns the Acks a delivery's write may ride, or nil.
func acksOf(ctx context.Context) *broker.Acks {
	a, _ := ctx.Value(acksKey{}).(*broker.Acks)
	return a
}

// newAcks returns the worker's Acks, or nil where writes must not ride
// asynq's ack (see above).
func newAcks(rdb redis.UniversalClient, replicas int, log *slog.Logger) *broker.Acks {
	if _, cluster := rdb.(*redis.ClusterClient); cluster || replicas > 0 || os.Getenv(FailpointEnv) == "after_success_recorded" {
		return nil
	}
	return broker.NewAcks(func(id string) {
		log.Warn("asynq never acknowledged a delivery that succeeded; its success was not recorded and the task runs again", "task_id", id)
	})
}

// forgetAck drops a write an earlier delivery of this task left and
// asynq never acknowledged (its lease was lost).
func forgetAck(ctx context.Context) {
	if acks := acksOf(ctx); acks != nil && acks.Len() > 0 {
		if m := metaOf(ctx); m.ok {
			acks.Forget(m.id)
		}
	}
}

// ackCompleter is the completer of a worker whose successes may ride
// asynq's ack: a success whose delivery's context is live, while the
// worker is not stopping, is left in the worker's Acks (successAck) and
// written with asynq's done of the delivery; every other write is inline.
type ackCompleter struct {
	inlineCompleter
	stopping *atomic.Bool // the worker is shutting down (Executor.stopping)
	done     *successes
}

func (c *ackCompleter) succeed(ctx context.Context, d record.Delivery, ch record.Change) (record.Outcome, bool, error) {
	acks := acksOf(ctx)
	m := metaOf(ctx)
	id, ok := m.id, m.ok
	if acks == nil || !ok || ctx.Err() != nil || c.stopping.Load() {
		return c.inlineCompleter.succeed(ctx, d, ch)
	}
	acks.Put(id, &successAck{rec: c.rec, done: c.done, d: d, c: ch})
	return record.Applied, true, nil
}

// successAck is a success's record write waiting for asynq's ack.
type successAck struct {
	rec  *record.Store
	done *successes
	d    record.Delivery
	c    record.Change
}

// WithDone implements broker.Ack: the success and asynq's done in one
// script (record.Store.ApplyAcked), waiting out a Redis outage.
func (s *successAck) WithDone(ctx context.Context, keys []string, args []any, next *broker.Next) *redis.Cmd {
	growStack() // asynq's goroutine that answers the delivery
	cmd := redis.NewCmd(ctx)
	done := record.AsynqDone{Keys: keys, Args: args, Next: next}
	var out record.Outcome
	err := untilRedis(ctx, func() (err error) {
		out, err = s.rec.ApplyAcked(ctx, s.d, s.c, done)
		return err
	})
	switch {
	case errors.Is(err, record.ErrNotActive) && out == record.Applied:
		// The record holds the success. asynq's done found the delivery
		// gone: its lease was lost, or this is a resend whose first send
		// acked it and lost the reply. Either way there is nothing for
		// asynq to do.
	case err != nil:
		s.done.log.Error("could not record success", "task_id", s.d.ID, "err", err)
		cmd.SetErr(err)
		return cmd
	}
	s.done.count(s.d, out)
	cmd.SetVal("OK")
	return cmd
}

// Alone implements broker.Ack: the success written without asynq's done
// (asynq answered the delivery otherwise, or the worker stopped).
func (s *successAck) Alone(ctx context.Context) {
	out, err := inlineCompleter{rec: s.rec}.apply(ctx, s.d, s.c)
	if err != nil {
		s.done.log.Error("could not record success", "task_id", s.d.ID, "err", err)
		return
	}
	s.done.count(s.d, out)
}

// successes counts the successes' writes (and logs the ones that were
// not applied).
type successes struct {
	log     *slog.Logger
	metrics *Metrics
}

// count counts a success's write that found out (its log says what
// became of one that was not applied).
func (p *successes) count(d record.Delivery, out record.Outcome) {
	switch {
	case out != record.Applied:
		p.log.Warn("a success was not recorded: the run was "+out.String(), "task_id", d.ID, "run", d.Run)
	case d.Restarts > 0:
		p.metrics.restartResults.WithLabelValues(p.metrics.agent(d.Seed.Agent), "succeeded").Inc()
	}
}

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
