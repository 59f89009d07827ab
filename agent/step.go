package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// Steps: an agent records a step — a named result of work it did (a model
// call, a tool run) — while a task runs; every later attempt, restart or
// requeue of the task gets the steps recorded so far in its Request
// (Steps) and skips the work they stand for (DESIGN.md "Steps"). A step
// is recorded durably before the attempt's outcome, in order with the
// call's other events; a name recorded twice keeps the first.
//
//   - Exec agents write a line {"type":"step","name":…,"data":…,"usage":…}
//     to the descriptor AGENTQ_EVENTS_FD names (usage optional, the shape
//     of an ActionResponse's usage).
//   - HTTP agents get Steps in the ActionRequest (they record none).
//   - Go agents call Request.Step.
const EventStep = "step"

// StepEvent is one step an agent records.
type StepEvent struct {
	Name string          `json:"name"`
	Data json.RawMessage `json:"data"`
	// Usage is what the step used (optional): a number of tokens or a
	// usage object, as an ActionResponse's usage; priced and debited like
	// a call's.
	Usage json.RawMessage `json:"usage,omitempty"`
	// TooLarge, when not 0, is the size of an exec agent's step line that
	// went over the most an events line may hold (MaxStepLine): the step
	// is not recorded and the worker fails the attempt (logic_error).
	TooLarge int `json:"-"`
}

// MaxStepLine caps one step line an exec agent writes to its events
// pipe: a step's data at most 1 MiB (record.MaxStepBytes) and room for its
// name, usage and envelope.
const MaxStepLine = 1<<20 + 8<<10

// ErrNoSteps is Request.Step's error when the call cannot record steps
// (its Request has no RecordStep: not run by a worker).
var ErrNoSteps = errors.New("agent: this call cannot record steps")

// StepResult is what a Go agent's step function may return to report the
// step's usage with its data.
type StepResult struct {
	Data  any
	Usage json.RawMessage
}

// Step runs the step name of a Go agent: when the task has recorded it
// already (Steps), its data is returned and fn is not run; otherwise fn
// runs and its result (JSON-encoded; a StepResult to report usage too) is
// recorded durably — Step returns once it is written — and returned. An
// error of fn is returned as it is, recording nothing; an error recording
// the step (a cap, a stale delivery) is returned and the agent should
// return it. A Request with no RecordStep (not run by a worker) answers
// ErrNoSteps without running fn.
func (r Request) Step(ctx context.Context, name string, fn func(ctx context.Context) (any, error)) (json.RawMessage, error) {
	if data, ok := r.Steps[name]; ok {
		return data, nil
	}
	if r.RecordStep == nil {
		return nil, ErrNoSteps
	}
	v, err := fn(ctx)
	if err != nil {
		return nil, err
	}
	ev := StepEvent{Name: name}
	if sr, ok := v.(StepResult); ok {
		v, ev.Usage = sr.Data, sr.Usage
	}
	if ev.Data, err = json.Marshal(v); err != nil {
		return nil, fmt.Errorf("agent: step %q: encode its data: %w", name, err)
	}
	if err := r.RecordStep(ctx, ev); err != nil {
		return nil, err
	}
	return ev.Data, nil
}
