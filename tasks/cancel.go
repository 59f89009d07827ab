package tasks

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/rkeys"
)

// ErrTaskEnded is wrapped by the *EndedError Cancel returns for a task
// that has already ended (succeeded, dead_lettered or canceled).
var ErrTaskEnded = record.ErrTaskEnded

// EndedError is Cancel's (and Signal's) error for a task that has
// already ended: State says how (succeeded, dead_lettered or canceled).
// Nothing was changed.
type EndedError struct {
	ID    string
	State State
	// Refused is what could not be done ("" for canceled; "signaled").
	Refused string
}

func (e *EndedError) Error() string {
	return fmt.Sprintf("task %s has already ended (state %s): it cannot be %s", e.ID, e.State, cmp.Or(e.Refused, "canceled"))
}

// Unwrap makes errors.Is(err, ErrTaskEnded) true.
func (e *EndedError) Unwrap() error { return ErrTaskEnded }

// CancelResult says what Cancel did (JSON: `inspector task cancel --json`).
type CancelResult struct {
	ID string `json:"id"`
	// State is the task's state now: always canceled.
	State State `json:"state"`
	// PreviousState is the state the task was canceled in.
	PreviousState State `json:"previous_state"`
	// Removed is true when the task's run was taken off its queue (it was
	// waiting: pending, scheduled, retrying, deferred or restarting).
	Removed bool `json:"removed"`
	// Stopping is true when the run was not waiting on its queue (running,
	// or being taken by a worker) and the worker running it was told to
	// stop it (asynq's cancel channel). Either way its outcome is not
	// recorded: the record is canceled first.
	Stopping bool   `json:"stopping"`
	Reason   string `json:"reason"`
}

// MaxCancelReason bounds the length of a cancel's reason (bytes).
const MaxCancelReason = 1000

// CheckCancelReason returns a *ValidationError naming field "reason" when
// a cancel's reason is longer than MaxCancelReason bytes or has a
// character CheckText refuses (it is shown in the inspector and the
// console).
func CheckCancelReason(reason string) error {
	if len(reason) > MaxCancelReason {
		return &ValidationError{"reason", fmt.Sprintf("is %d bytes; at most %d", len(reason), MaxCancelReason)}
	}
	return CheckText("reason", reason)
}

// Cancel cancels task id, wherever it is, with reason (may be ""; at most
// MaxCancelReason bytes): the task ends in state canceled, with an
// EventTaskCanceled event carrying the reason; it is not retried,
// restarted or dead-lettered, and its breaker does not count it.
//
//   - First the record is marked canceled, atomically and only if the task
//     has not ended. From then on every write of a worker for any run of
//     the task is refused (ErrCanceled), so no outcome of the task is
//     recorded and no retry, restart or dead letter follows.
//   - A run waiting on its queue (pending, scheduled, retrying, deferred,
//     restarting) is deleted from it (and from the restart index), so it
//     never runs.
//   - A run that is not on its queue (active, or being taken by a worker)
//     is stopped by the worker that runs it: asynq's CancelProcessing
//     reaches it through pub/sub and ends the attempt's context (an exec
//     agent's process group gets SIGTERM, then SIGKILL; an HTTP call is
//     aborted). A delivery that misses that message finds the mark when it
//     writes the attempt's start (at once for a redelivery or a later run,
//     50 ms into a first run's call) and stops its agent then.
//
// Errors: ErrNotFound (unknown ID, or its record expired), an *EndedError
// (wrapping ErrTaskEnded) for a task that has already ended — a dead
// letter whose record has expired counts as dead_lettered —, a
// *ValidationError for a reason that is too long or has a control or
// bidirectional formatting character (CheckCancelReason), or a Redis
// error.
func (c *Client) Cancel(ctx context.Context, id, reason string) (CancelResult, error) {
	if id == "" {
		return CancelResult{}, &ValidationError{"id", "is empty"}
	}
	if err := CheckCancelReason(reason); err != nil {
		return CancelResult{}, err
	}
	got, err := c.store.rec.Cancel(ctx, id, reason)
	if errors.Is(err, ErrTaskEnded) {
		return CancelResult{}, &EndedError{ID: id, State: got.Previous}
	}
	if errors.Is(err, ErrNotFound) {
		if dead, derr := c.store.rdb.HExists(ctx, rkeys.DLQEntries(), id).Result(); derr == nil && dead {
			return CancelResult{}, &EndedError{ID: id, State: StateDeadLettered}
		}
	}
	if err != nil {
		return CancelResult{}, err
	}
	if got.Queue == "" {
		got.Queue = DefaultQueue
	}
	res := CancelResult{ID: id, State: StateCanceled, PreviousState: got.Previous, Reason: reason}
	res.Removed, res.Stopping = c.takeOff(ctx, id, got)
	return res, nil
}

// takeOff removes the canceled task's run from its queue, or tells the
// worker running it to stop. Failures here lose nothing: the record is
// canceled already, and the worker that gets the run acks it unrun.
func (c *Client) takeOff(ctx context.Context, id string, got record.Cancellation) (removed, stopping bool) {
	insp := c.inspector()
	run := Envelope{ID: id, Run: got.Run}
	aid := run.AsynqID()
	if ok, _ := broker.RemoveFromLane(ctx, c.store.rdb, got.Queue, aid); ok {
		removed = true // it waited in its tenant's lane
	} else if err := insp.DeleteTask(got.Queue, aid); err == nil {
		removed = true
	} else {
		// Active (or being dequeued, or Redis trouble): stop it where it runs.
		stopping = insp.CancelProcessing(aid) == nil
	}
	switch got.Previous {
	case StateRestarting:
		_ = c.store.rdb.ZRem(ctx, rkeys.RestartPending(), id).Err()
	case StateActive, StatePending:
		// A restart (the next run) a worker scheduled and has not recorded
		// yet: that worker deletes it when its record write is refused,
		// but take it off now if it is already there.
		next := Envelope{ID: id, Run: got.Run + 1}
		if insp.DeleteTask(got.Queue, next.AsynqID()) == nil {
			_ = c.store.rdb.ZRem(ctx, rkeys.RestartPending(), id).Err()
		}
	}
	return removed, stopping
}

// inspector is the client's asynq inspector, on the client's connection.
func (c *Client) inspector() *asynq.Inspector {
	c.inspOnce.Do(func() { c.insp = asynq.NewInspectorFromRedisClient(c.store.rdb) })
	return c.insp
}
