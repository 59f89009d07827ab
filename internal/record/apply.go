package record

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/durx"
)

// applyScript is the checked write (lua/apply.lua: rec_apply, in
// lua/rec_apply.lua, documents its KEYS, ARGV and replies).
var applyScript = newApplyScript("apply.lua")

// applyAckedScript is the checked write and asynq's done of the delivery
// in one script (lua/apply_acked.lua).
var applyAckedScript = newAckedScript("apply_acked.lua", mustLua("rec_apply.lua"), broker.DoneLua)

// succeedAckedScript is a plain success written lean with asynq's done of
// the delivery (lua/succeed_acked.lua): ApplyAcked's first try.
var succeedAckedScript = newAckedScript("succeed_acked.lua", broker.DoneLua)

// Apply writes c for d, checked: only while d's run is current (or newer
// than the record's) and has not ended, and the task is not canceled. Its
// Outcome says which; nothing is written unless it is Applied. A c sent
// again after its reply was lost is recognised by its write ID and
// answers Applied without writing anything twice. The record and its
// history live for the retention plus the event's delay. Errors are
// Redis's: after one, whether c was applied is unknown, and sending c
// again is safe.
func (s *Store) Apply(ctx context.Context, d Delivery, c Change) (Outcome, error) {
	out, _, err := s.ApplyStart(ctx, d, c)
	return out, err
}

// ApplyStart is Apply answering also, for a change that starts an attempt
// (Change.Start) of a task whose agents recorded steps, suspended or got
// signals, what the delivery must read or hand its agent (StartInfo; zero
// otherwise): the delivery reads the steps (Steps) and signals (Signals)
// only when there are some, and a task without them pays no command.
func (s *Store) ApplyStart(ctx context.Context, d Delivery, c Change) (Outcome, StartInfo, error) {
	out, info, err := s.apply(d, c, nil, func(outbox bool, args []any) (any, error) {
		keys := keys(d.ID)
		if outbox {
			keys = s.outboxKeys(d.ID)
		}
		v, err := s.runner.Run(ctx, applyScript, keys, args...)
		if r, ok := v.([]any); ok && err == nil && len(r) > 3 {
			s.outboxed(ctx, d.ID, r[3])
		}
		return v, err
	})
	if err != nil {
		return out, StartInfo{}, fmt.Errorf("record: %s of %s: %w", c.name(), d.ID, err)
	}
	return out, info, nil
}

// StartInfo is what a write that starts an attempt (ApplyStart) tells of
// the task's steps, signals and wait.
type StartInfo struct {
	// Steps and Signals are how many steps and signals the record counts.
	Steps, Signals int
	// Wait is the task's current or last wait (its JSON, Wait.JSON; nil
	// when the task never suspended) and WaitOutcome what ended it
	// ("timer", "signal", "timeout", "children"; "" while it waits): a
	// resumed run's start decides it.
	Wait        json.RawMessage
	WaitOutcome string
	// SignalReady: the change suspended the run (Waiting) for a signal
	// that had been sent already: the caller resumes the run at once.
	SignalReady bool
	// Resumed: this start decided WaitOutcome (the run's first start
	// after the suspend; event resumed).
	Resumed bool
}

// startInfo reads rec_apply's reply after its code (rest) for an applied
// write: its steps, then its signals, wait, outcome and ready.
func startInfo(rest []any) StartInfo {
	var info StartInfo
	if len(rest) > 3 {
		n, _ := rest[3].(int64)
		info.Steps = int(n)
	}
	if len(rest) > 7 {
		n, _ := rest[4].(int64)
		info.Signals = int(n)
		if w, _ := rest[5].(string); w != "" {
			info.Wait = json.RawMessage(w)
		}
		info.WaitOutcome, _ = rest[6].(string)
		ready, _ := rest[7].(int64)
		info.SignalReady = ready == 1
	}
	if len(rest) > 8 {
		resumed, _ := rest[8].(int64)
		info.Resumed = resumed == 1
	}
	return info
}

// AsynqDone is the call asynq's server makes to acknowledge a delivery that
// succeeded: its done script's keys and arguments, as asynq passes them
// (see broker.AsynqDoneScript).
type AsynqDone struct {
	Keys []string
	Args []any
	// Next, when set, asks the same script to hand out the queue's next
	// run (complete-and-fetch-next, internal/broker's prefetch.go), which
	// ApplyAcked sets in it.
	Next *broker.Next
}

// ErrNotActive is ApplyAcked's error when asynq's done found the delivery
// no longer active (its lease was lost): the record write was applied,
// the acknowledgement was not.
var ErrNotActive = errors.New("delivery no longer active in asynq")

// ApplyAcked is Apply run in one script with asynq's acknowledgement of
// the delivery, done (a quick success rides the call asynq's server makes
// anyway: a task costs Redis one script call fewer, and the record and
// the ack land together; not on a Redis Cluster, where asynq's keys and the
// record are in different slots). It runs on the store's ack runner
// (WithAckRunner: the worker's batcher when it runs tasks concurrently;
// else a round trip of its own, like asynq's own call). Whatever the
// Outcome, the delivery was acknowledged; ErrNotActive means the record
// was written but asynq's done found the delivery gone. A plain success
// goes first as the lean write (succeedAcked), and as the checked write
// only when the record is not in the common state.
func (s *Store) ApplyAcked(ctx context.Context, d Delivery, c Change, done AsynqDone) (Outcome, error) {
	if len(done.Keys) != 5 || len(done.Args) != 3 {
		return Applied, fmt.Errorf("record: asynq's done call has %d keys and %d arguments, not 5 and 3", len(done.Keys), len(done.Args))
	}
	head := done.Args
	if done.Next != nil {
		head = append(append(make([]any, 0, 9), done.Args...), done.Next.Args...)
	}
	out, lean, err := s.succeedAcked(ctx, d, c, done, head)
	if !lean {
		out, err = s.applyAcked(ctx, d, c, done, head)
	}
	var rerr redis.Error
	if errors.As(err, &rerr) && rerr.Error() == "NOT FOUND" {
		err = ErrNotActive
	}
	if err != nil {
		return out, fmt.Errorf("record: %s of %s with its ack: %w", c.name(), d.ID, err)
	}
	return out, nil
}

// succeedAcked is ApplyAcked's first try for a plain success of a task
// whose seed names no webhook: the write as succeed_acked.lua makes it,
// with asynq's done. lean is false when c is not such a success or the
// script answered CodeFull (nothing written, asynq's done not run): the
// caller sends the write as apply_acked.
func (s *Store) succeedAcked(ctx context.Context, d Delivery, c Change, done AsynqDone, head []any) (out Outcome, lean bool, err error) {
	if !c.plainSuccess() || len(d.Seed.Notify) > 0 {
		return Applied, false, nil
	}
	release := broker.ReleaseKeys(broker.QueueOf(done.Keys[0]))
	keys := append(append(append(make([]string, 0, 15), done.Keys...), keys(d.ID)...), release...)
	if done.Next != nil {
		nk, ok := leanNextKeys(done.Next.Keys, done.Keys, release)
		if !ok {
			return Applied, false, nil
		}
		keys = append(keys, nk...)
	}
	v, err := s.acks.Run(ctx, succeedAckedScript, keys, s.write(c).leanArgs(d, head)...)
	code, _, err := reply(nextOf(done.Next)(v, err))
	switch {
	case err != nil:
		return Applied, true, err
	case code == CodeApplied:
		return Applied, true, nil
	case code == CodeFull:
		return Applied, false, nil
	}
	return Applied, true, fmt.Errorf("unexpected reply code %d", code)
}

// leanNextKeys are the keys of the next run's dequeue (dequeue.lua's nine,
// internal/broker's Next) that succeed_acked.lua is not given already:
// the pending list, the paused set, the tenants' settings and the default
// tenant's pass (acked.lua rebuilds the nine). ok is false when the others
// are not asynq's done's active list and lease (done) and the release's
// ready set, capped set and in-flight counts (release) as it expects.
func leanNextKeys(next, done, release []string) (keys []string, ok bool) {
	if len(next) != 9 || next[2] != done[0] || next[3] != done[1] || next[4] != release[2] || next[5] != release[1] ||
		next[6] != release[0] {
		return nil, false
	}
	return []string{next[0], next[1], next[7], next[8]}, true
}

// applyAcked is ApplyAcked's checked write (apply_acked.lua).
func (s *Store) applyAcked(ctx context.Context, d Delivery, c Change, done AsynqDone, head []any) (Outcome, error) {
	out, _, err := s.apply(d, c, head, func(outbox bool, args []any) (any, error) {
		rk := keys(d.ID)
		if outbox {
			rk = s.outboxKeys(d.ID)
		}
		keys := append(append(append(make([]string, 0, 22), done.Keys...), rk...), broker.ReleaseKeys(broker.QueueOf(done.Keys[0]))...)
		if done.Next != nil {
			keys = append(keys, done.Next.Keys...)
		}
		return nextOf(done.Next)(s.acks.Run(ctx, applyAckedScript, keys, args...))
	})
	return out, err
}

// nextOf unwraps the reply of a script that may have handed out the next
// run (acked.lua): the run's message alone (the write applied, a run
// handed out) or {"next", rec_apply's reply, message, task ID}, setting
// next; other replies pass as they are.
func nextOf(next *broker.Next) func(v any, err error) (any, error) {
	return func(v any, err error) (any, error) {
		if err != nil || next == nil {
			return v, err
		}
		if msg, ok := v.(string); ok {
			if err := next.SetFetchedMessage(msg); err != nil {
				return nil, err
			}
			return int64(CodeApplied), nil
		}
		r, ok := v.([]any)
		if !ok || len(r) != 4 || r[0] != "next" {
			return v, err
		}
		if err := next.SetFetched(r[2], r[3]); err != nil {
			return nil, err
		}
		return r[1], nil
	}
}

// apply makes the call of rec_apply (run, given whether to pass the
// webhook outbox's keys and its arguments, after head) for d and c, and maps the
// reply. The seed pairs go only with a second call, when the first finds
// no record written by Create; the outbox's keys go when d's seed names
// webhooks, or with a second call when the record does (CodeOutbox): a
// task without webhooks costs Redis no more keys.
func (s *Store) apply(d Delivery, c Change, head []any, run func(outbox bool, args []any) (any, error)) (Outcome, StartInfo, error) {
	w := s.write(c)
	outbox := len(d.Seed.Notify) > 0
	code, rest, err := reply(run(outbox, w.args(d, false, head...)))
	if err == nil && code == CodeOutbox {
		outbox = true
		code, rest, err = reply(run(outbox, w.args(d, false, head...)))
	}
	if err == nil && code == CodeSeed {
		code, rest, err = reply(run(outbox, w.args(d, true, head...)))
	}
	if err != nil {
		return Applied, StartInfo{}, err
	}
	switch code {
	case CodeApplied:
		return Applied, startInfo(rest), nil
	case CodeRepeat:
		return Applied, StartInfo{}, nil
	case CodeStale:
		return Stale, StartInfo{}, nil
	case CodeEnded:
		return Ended, StartInfo{}, nil
	case CodeCanceled:
		return Canceled, StartInfo{}, nil
	}
	return Applied, StartInfo{}, fmt.Errorf("unexpected reply code %d", code)
}

// write is a Change ready for rec_apply: stamped, its event encoded.
type write struct {
	c        Change
	event    []byte // the event's JSON without its "{" (nil: none); go-redis sends it as a string
	fields   []any
	at       time.Time // the write's time (UTC): its event's, updated_at
	lifetime time.Duration
}

func (s *Store) write(c Change) write {
	if c.WriteID == "" {
		c.WriteID = newWriteID() // a Change not made by a constructor: applied, but not idempotent
	}
	w := write{c: c, lifetime: s.lifetime(c.Event)}
	at := s.now().UTC()
	if c.Event != nil {
		ev := *c.Event
		ev.Seq = 0
		ev.At = s.stamp(ev.At)
		at = ev.At
		w.event = ev.Marshal()[1:] // rec_apply's event: without its "{" (Marshal's first byte, always)
	}
	w.at = at.UTC()
	w.fields = c.fields(at)
	return w
}

// args are rec_apply's ARGV for d after head (the arguments a script
// takes before rec_apply's): the seed pairs only when seed is set.
func (w write) args(d Delivery, seed bool, head ...any) []any {
	secs, keep := w.lifetimes()
	attempt, next, merge, clear, worker := 0, -1, "0", "0", ""
	if w.c.Start {
		attempt, worker = max(d.Attempt, 1), d.Worker
	}
	if w.c.NextRun != nil {
		next = w.c.NextRun.Run
	}
	if w.c.Event != nil && w.c.Event.Event == EventDeferred {
		merge = "1"
	}
	if w.c.ClearError && w.c.ErrorClass == "" {
		clear = "1"
	}
	var pairs []any
	if seed {
		pairs = d.Seed.pairs(d.ID)
	}
	args := make([]any, 0, len(head)+13+len(pairs)+len(w.fields))
	args = append(args, head...)
	args = append(args, d.Run, w.c.WriteID, attempt, d.Restarts, next, secs, keep, w.event, merge, clear, len(pairs)/2,
		FormatUsageSum(w.c.Usage), worker)
	args = append(args, pairs...)
	return append(args, w.fields...)
}

// lifetimes are the write's lifetime and the remaining lifetime that
// needs no refresh (s).
func (w write) lifetimes() (secs, keep int64) {
	secs = durx.CeilSeconds(w.lifetime)
	return secs, secs - int64(refreshSlack(w.lifetime)/time.Second)
}

// leanArgs are succeed_acked.lua's ARGV for d after head (ApplyAcked's:
// asynq's done arguments, and Next's).
func (w write) leanArgs(d Delivery, head []any) []any {
	secs, keep := w.lifetimes()
	args := make([]any, 0, len(head)+12)
	args = append(args, head...)
	args = append(args, d.Run, w.c.WriteID, max(d.Attempt, 1), secs, keep, w.event, w.at.Format(time.RFC3339Nano), d.Worker)
	if u := FormatUsageSum(w.c.Usage); u != "" {
		args = append(args, FieldUsage, u)
	}
	if res := w.c.storedResult(); res != nil {
		args = append(args, FieldResult, res)
	}
	return args
}

// name is the change's name in errors: its event's, or its state's.
func (c Change) name() string {
	if c.Event != nil {
		return c.Event.Event
	}
	return "start (" + string(c.State) + ")"
}
