package record

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// ErrTaskEnded is Cancel's error for a task that has already ended
// (succeeded, dead_lettered or canceled): the Cancellation's Previous
// says how. Nothing was changed. (tasks.Client.Cancel makes it a
// tasks.EndedError.)
var ErrTaskEnded = errors.New("task has already ended")

// cancelScript is Store.Cancel (lua/cancel.lua documents its KEYS, ARGV
// and replies).
var cancelScript = newScript("cancel.lua")

// Cancellation is what Cancel found and did.
type Cancellation struct {
	// Previous is the state the task was canceled in.
	Previous State
	Run      int
	Queue    string
}

// CancelText is the error text of a cancel's event and record.
func CancelText(reason string) string {
	if reason == "" {
		return "canceled"
	}
	return "canceled: " + reason
}

// Cancel marks task id canceled with reason, atomically and only if it
// has not ended: its record's state becomes canceled, for good, and its
// history gains an EventTaskCanceled event. Sent again after a lost reply
// it answers as the first time. It does not touch the task's queue.
// Errors: ErrNotFound (no record), ErrTaskEnded (with the Cancellation's
// Previous).
func (s *Store) Cancel(ctx context.Context, id, reason string) (Cancellation, error) {
	ev := Event{At: s.stamp(time.Time{}), Event: EventTaskCanceled, Error: CancelText(reason), Reason: reason}
	code, rest, err := reply(s.runner.Run(ctx, cancelScript, s.outboxKeys(id), string(ev.Marshal()), ev.Error,
		ev.At.Format(time.RFC3339Nano), reason, int64(s.retention/time.Second), newWriteID()))
	if err != nil {
		return Cancellation{}, fmt.Errorf("record: cancel %s: %w", id, err)
	}
	str := func(i int) string {
		if i < len(rest) {
			s, _ := rest[i].(string)
			return s
		}
		return ""
	}
	switch code {
	case CodeMissing:
		return Cancellation{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	case CodeEnded:
		return Cancellation{Previous: State(str(0))}, fmt.Errorf("%w: %s", ErrTaskEnded, id)
	case CodeApplied, CodeRepeat:
		if len(rest) > 3 {
			s.outboxed(ctx, id, rest[3])
		}
		c := Cancellation{Previous: State(str(0)), Queue: str(2)}
		c.Run, _ = strconv.Atoi(str(1))
		return c, nil
	}
	return Cancellation{}, fmt.Errorf("record: cancel %s: unexpected reply code %d", id, code)
}

// requeueScript is Store.Requeued (lua/requeue.lua documents its KEYS,
// ARGV and replies).
var requeueScript = newScript("requeue.lua")

// Requeued records that d's run (a requeue of a dead letter, already
// enqueued) waits on its queue: state pending, a fresh restart budget, the
// error cleared, and the "requeued" event ev. When the record has expired
// it is rebuilt from d's seed, the dead letter's attempts and its history
// hist (whose events keep their seq). A record at a later run, or
// canceled, is left alone; one whose run has already begun only gains ev.
func (s *Store) Requeued(ctx context.Context, d Delivery, attempts int, hist []Event, ev Event) error {
	ev.Seq = 0
	ev.At = s.stamp(ev.At)
	seed := append(d.Seed.pairs(d.ID), FieldAttempts, attempts)
	args := make([]any, 0, 6+len(seed)+len(hist))
	args = append(args, d.Run, int64(s.retention/time.Second), string(ev.Marshal()), ev.At.Format(time.RFC3339Nano),
		newWriteID(), len(seed)/2)
	args = append(args, seed...)
	for _, h := range hist {
		args = append(args, string(h.Marshal()))
	}
	_, rest, err := reply(s.runner.Run(ctx, requeueScript, s.outboxKeys(d.ID), args...))
	if err != nil {
		return fmt.Errorf("record: requeue of %s: %w", d.ID, err)
	}
	if len(rest) > 0 {
		s.outboxed(ctx, d.ID, rest[0])
	}
	return nil
}

// recoveredScript is Store.Recovered (lua/recovered.lua documents its
// KEYS, ARGV and replies).
var recoveredScript = newScript("recovered.lua")

// Recovered records that task id's attempt, active on worker (the events'
// worker, "host:pid"), was lost with it and that asynq's lease recovery
// took the run back: while the record is still active on worker, it goes
// back to pending and its history gains EventInterrupted with Lost, the
// lost attempt and the worker. It reports whether it wrote; a record that
// moved on (another delivery started it, it ended, waits or was canceled)
// is left alone.
func (s *Store) Recovered(ctx context.Context, id, worker string) (bool, error) {
	at := s.stamp(time.Time{}).Format(time.RFC3339Nano)
	code, rest, err := reply(s.runner.Run(ctx, recoveredScript, s.outboxKeys(id), worker, at, int64(s.retention/time.Second), newWriteID()))
	if err != nil {
		return false, fmt.Errorf("record: recovery of %s: %w", id, err)
	}
	if code != CodeApplied {
		return false, nil
	}
	if len(rest) > 0 {
		s.outboxed(ctx, id, rest[0])
	}
	return true, nil
}
