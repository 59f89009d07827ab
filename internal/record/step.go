package record

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/amount"
	"github.com/agentq/agentq/internal/durx"
	"github.com/agentq/agentq/internal/redisx"
	"github.com/agentq/agentq/internal/rkeys"
)

// A task's steps are bounded: at most MaxSteps steps, each step's data at
// most MaxStepBytes bytes, and at most MaxStepsBytes bytes of step data
// in all. A step over a cap is refused (StepCapError), never dropped
// silently: the delivery fails its attempt logic_error.
const (
	MaxSteps      = 256
	MaxStepBytes  = 1 << 20
	MaxStepsBytes = 8 << 20
)

// Step is one step a task's agent recorded: a named result (Data, JSON)
// that every later attempt, restart or requeue of the task is handed
// (Steps) so that it skips the work the step stands for.
type Step struct {
	Name string
	Data json.RawMessage
	// Usage is what the step used, priced (zero: none): it is added to
	// the task's usage sum and shown on the step's event.
	Usage amount.Usage
	// At is when the step was recorded (zero: now).
	At time.Time
}

// ErrStepRefused is what every refusal of a step by the task's state
// matches (errors.Is): a StepRefusedError.
var ErrStepRefused = errors.New("step refused")

// StepRefusedError: the step was not written because the delivery's run
// is no longer the task's live one (Outcome Stale, Ended or Canceled), as
// every write of a stale delivery is refused; a task with no record is
// Ended.
type StepRefusedError struct{ Outcome Outcome }

func (e *StepRefusedError) Error() string {
	return "step refused: the run is " + e.Outcome.String()
}

// Is makes every StepRefusedError match ErrStepRefused.
func (e *StepRefusedError) Is(target error) bool { return target == ErrStepRefused }

// StepCapError: the step would go over one of the task's caps (Cap:
// "steps", MaxSteps; "step_bytes", MaxStepBytes; "task_bytes",
// MaxStepsBytes); nothing was written.
type StepCapError struct {
	Name  string
	Cap   string
	Limit int64
	Bytes int
}

func (e *StepCapError) Error() string {
	switch e.Cap {
	case "steps":
		return fmt.Sprintf("step %q refused: the task has recorded the most steps a task may (%d)", e.Name, e.Limit)
	case "step_bytes":
		return fmt.Sprintf("step %q refused: its data is %d bytes, over the cap of %d bytes per step", e.Name, e.Bytes, e.Limit)
	}
	return fmt.Sprintf("step %q refused: its %d bytes would take the task's steps over their cap of %d bytes", e.Name, e.Bytes, e.Limit)
}

// stepScript is Store.Step (lua/step.lua documents its KEYS, ARGV and
// replies).
var stepScript = newScript("step.lua")

// Step records st for delivery d: its data in the task's steps hash, the
// record's step count, bytes and usage sum, and a history event step
// (announced, and in the webhook outbox, like every event), in one
// script. Fenced like Apply: a step of a run that is stale or has ended,
// or of a canceled task, is refused (a StepRefusedError). A step whose
// name is recorded already keeps the first: recorded is false and nothing
// is written. A step over a cap is a StepCapError. Other errors are
// Redis's: sending st again is safe (the first write wins).
func (s *Store) Step(ctx context.Context, d Delivery, st Step) (recorded bool, err error) {
	if st.Name == "" {
		return false, fmt.Errorf("record: step of %s: a step needs a name", d.ID)
	}
	data := st.Data
	if len(data) == 0 {
		data = json.RawMessage("null")
	}
	if len(data) > MaxStepBytes {
		return false, &StepCapError{Name: st.Name, Cap: "step_bytes", Limit: MaxStepBytes, Bytes: len(data)}
	}
	ev := Event{At: s.stamp(st.At), Event: EventStep, Attempt: d.Attempt, Restart: d.Restarts, Name: st.Name, Bytes: len(data)}
	if !st.Usage.IsZero() || st.Usage.CostUSD != 0 {
		u := st.Usage
		ev.Usage = &u
	}
	life := s.retention
	secs := durx.CeilSeconds(life)
	keep := secs - int64(refreshSlack(life)/time.Second)
	args := []any{d.Run, st.Name, string(data), string(ev.Marshal()), FormatUsageSum(st.Usage),
		MaxSteps, MaxStepBytes, MaxStepsBytes, secs, keep}
	ks := []string{rkeys.Task(d.ID), rkeys.TaskHistory(d.ID), rkeys.TaskSteps(d.ID)}
	run := func(outbox bool) (Code, []any, error) {
		k := ks
		if outbox {
			k = append(ks, s.outboxKeys(d.ID)[2:]...)
		}
		v, err := s.runner.Run(ctx, stepScript, k, args...)
		if r, ok := v.([]any); ok && err == nil && len(r) > 2 && outbox {
			s.outboxed(ctx, d.ID, r[2])
		}
		return reply(v, err)
	}
	code, rest, err := run(len(d.Seed.Notify) > 0)
	if err == nil && code == CodeOutbox {
		code, rest, err = run(true)
	}
	if err != nil {
		return false, fmt.Errorf("record: step %q of %s: %w", st.Name, d.ID, err)
	}
	return stepReply(d, st.Name, len(data), code, rest)
}

// stepReply maps step.lua's reply.
func stepReply(d Delivery, name string, size int, code Code, rest []any) (bool, error) {
	switch code {
	case CodeApplied:
		return true, nil
	case CodeRepeat:
		return false, nil
	case CodeCap:
		c := &StepCapError{Name: name, Bytes: size}
		if len(rest) > 1 {
			c.Cap, _ = rest[0].(string)
			c.Limit, _ = rest[1].(int64)
		}
		return false, c
	case CodeStale:
		return false, &StepRefusedError{Outcome: Stale}
	case CodeCanceled:
		return false, &StepRefusedError{Outcome: Canceled}
	case CodeEnded, CodeMissing:
		return false, &StepRefusedError{Outcome: Ended}
	}
	return false, fmt.Errorf("record: step %q of %s: unexpected reply code %d", name, d.ID, code)
}

// Steps reads task id's steps (name -> data; empty when it has none) in
// one command.
func (s *Store) Steps(ctx context.Context, id string) (map[string]json.RawMessage, error) {
	return s.readHash(ctx, rkeys.TaskSteps(id), "steps", id)
}

// readHash reads the hash key of task id (its steps or signals: what)
// as name -> JSON data.
func (s *Store) readHash(ctx context.Context, key, what, id string) (map[string]json.RawMessage, error) {
	m, err := s.rdb.HGetAll(ctx, key).Result()
	if err != nil {
		return nil, fmt.Errorf("record: %s of %s: %w", what, id, err)
	}
	out := make(map[string]json.RawMessage, len(m))
	for k, v := range m {
		out[k] = json.RawMessage(v)
	}
	return out, nil
}

// ClearSteps deletes task id's steps and zeroes the record's count and
// bytes (a requeue asked to start afresh: `inspector dlq requeue --fresh`,
// `{"fresh":true}`), in one MULTI. Call it only while no run of the task
// may record a step: a dead letter's run has ended (step.lua refuses its
// steps), and the requeue enqueues the new run after it. A task with no
// steps is left as it is.
func (s *Store) ClearSteps(ctx context.Context, id string) error {
	cmds, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, rkeys.TaskSteps(id))
		p.HDel(ctx, rkeys.Task(id), FieldSteps, FieldStepsBytes)
		return nil
	})
	if err = redisx.TxErr(cmds, err); err != nil {
		return fmt.Errorf("record: clear the steps of %s: %w", id, err)
	}
	return nil
}
