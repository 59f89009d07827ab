package tasks

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/rkeys"
)

// ErrTaskEnded is wrapped by the *EndedError Cancel returns for a task
// that has already ended (succeeded, dead_lettered or canceled).
var ErrTaskEnded = errors.New("task has already ended")

// EndedError is Cancel's error for a task that has already ended: State
// says how (succeeded, dead_lettered or canceled). Nothing was changed.
type EndedError struct {
	ID    string
	State State
}

func (e *EndedError) Error() string {
	return fmt.Sprintf("task %s has already ended (state %s): it cannot be canceled", e.ID, e.State)
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

// cancelScript cancels a task: unless it has ended, its record goes to
// state canceled, for good, and its history gains the cancel's event.
// Every later write of a worker (beginScript, transitionScript,
// transitionIfRunScript, requeueScript) refuses a canceled record.
//
// KEYS[1] task record, KEYS[2] history
// ARGV[1] event JSON, ARGV[2] error text, ARGV[3] time (RFC3339Nano),
// ARGV[4] reason, ARGV[5] lifetime in seconds (the retention)
// Returns {1, previous state, run, queue} when canceled; {0} when there is
// no record; {-1, state} when the task has already ended (succeeded,
// dead_lettered, canceled): nothing is written then.
var cancelScript = redis.NewScript(historyLua + `
local cur = redis.call("HMGET", KEYS[1], "state", "run", "queue")
if not cur[1] then return {0} end
if cur[1] == "succeeded" or cur[1] == "dead_lettered" or cur[1] == "canceled" then return {-1, cur[1]} end
redis.call("HSET", KEYS[1], "state", "canceled", "error_class", "", "error", ARGV[2],
  "updated_at", ARGV[3], "canceled_at", ARGV[3], "cancel_reason", ARGV[4])
redis.call("HDEL", KEYS[1], "next_attempt_at")
hist_append(KEYS[2], ARGV[1], "0")
redis.call("EXPIRE", KEYS[1], ARGV[5])
redis.call("EXPIRE", KEYS[2], ARGV[5])
return {1, cur[1], cur[2] or "0", cur[3] or ""}
`)

// canceled is what Store.Cancel found and did.
type canceled struct {
	prev  State
	run   int
	queue string
}

// cancel marks task id canceled with reason, atomically and only if it
// has not ended: its record's state becomes canceled and its history gains
// an EventTaskCanceled event. It does not touch the task's queue (see
// Client.Cancel). Errors: ErrNotFound (no record), *EndedError.
func (s *Store) cancel(ctx context.Context, id, reason string) (canceled, error) {
	ev := Event{At: s.stamp(time.Time{}), Event: EventTaskCanceled, Error: cancelText(reason), Reason: reason}
	b := ev.marshal()
	res, err := s.eval(ctx, cancelScript, []string{rkeys.Task(id), rkeys.TaskHistory(id)},
		string(b), ev.Error, ev.At.Format(time.RFC3339Nano), reason, int64(s.retention/time.Second)).Slice()
	if err != nil {
		return canceled{}, fmt.Errorf("tasks: cancel %s: %w", id, err)
	}
	code, _ := res[0].(int64)
	switch code {
	case 0:
		return canceled{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	case -1:
		st, _ := res[1].(string)
		return canceled{}, &EndedError{ID: id, State: State(st)}
	}
	var c canceled
	if len(res) == 4 {
		st, _ := res[1].(string)
		run, _ := res[2].(string)
		c.prev = State(st)
		c.run, _ = strconv.Atoi(run)
		c.queue, _ = res[3].(string)
	}
	if c.queue == "" {
		c.queue = DefaultQueue
	}
	return c, nil
}

// cancelText is the error text of a cancel's event and record.
func cancelText(reason string) string {
	if reason == "" {
		return "canceled"
	}
	return "canceled: " + reason
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
	got, err := c.store.cancel(ctx, id, reason)
	if errors.Is(err, ErrNotFound) {
		if dead, derr := c.store.rdb.HExists(ctx, rkeys.DLQEntries(), id).Result(); derr == nil && dead {
			return CancelResult{}, &EndedError{ID: id, State: StateDeadLettered}
		}
	}
	if err != nil {
		return CancelResult{}, err
	}
	res := CancelResult{ID: id, State: StateCanceled, PreviousState: got.prev, Reason: reason}
	res.Removed, res.Stopping = c.takeOff(ctx, id, got)
	return res, nil
}

// takeOff removes the canceled task's run from its queue, or tells the
// worker running it to stop. Failures here lose nothing: the record is
// canceled already, and the worker that gets the run acks it unrun.
func (c *Client) takeOff(ctx context.Context, id string, got canceled) (removed, stopping bool) {
	insp := c.inspector()
	run := Envelope{ID: id, Run: got.run}
	aid := run.AsynqID()
	if err := insp.DeleteTask(got.queue, aid); err == nil {
		removed = true
	} else {
		// Active (or being dequeued, or Redis trouble): stop it where it runs.
		stopping = insp.CancelProcessing(aid) == nil
	}
	switch got.prev {
	case StateRestarting:
		_ = c.store.rdb.ZRem(ctx, rkeys.RestartPending(), id).Err()
	case StateActive, StatePending:
		// A restart (the next run) a worker scheduled and has not recorded
		// yet: that worker deletes it when its record write is refused,
		// but take it off now if it is already there.
		next := Envelope{ID: id, Run: got.run + 1}
		if insp.DeleteTask(got.queue, next.AsynqID()) == nil {
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
