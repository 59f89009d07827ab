package tasks

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/agentq/agentq/internal/record"
)

// Signal errors (errors.Is): ErrSignalInvalid, a name that is not 1 to
// MaxSignalName characters of [A-Za-z0-9._:-] or data that is not JSON;
// ErrSignalTooLarge, data over MaxSignalBytes; ErrSignalCap, a task with
// MaxSignals signals already.
var (
	ErrSignalInvalid  = record.ErrSignalInvalid
	ErrSignalTooLarge = record.ErrSignalTooLarge
	ErrSignalCap      = record.ErrSignalCap
)

// A task's signals are bounded (see Client.Signal).
const (
	MaxSignals     = record.MaxSignals
	MaxSignalBytes = record.MaxSignalBytes
	MaxSignalName  = record.MaxSignalName
)

// SignalResult says what Signal did (JSON: POST
// /api/v1/tasks/{id}/signals/{name}, `inspector task signal --json`).
type SignalResult struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// State is the task's state after the call (waiting while a resumed
	// run has not started yet).
	State State `json:"state"`
	// Resumed: the task waited for this signal: its next run was made
	// due now (a signal sent again while it still waits says so again,
	// and completes a resume a crash cut).
	Resumed bool `json:"resumed"`
	// Duplicate: a signal of this name had been sent already: the first
	// is kept, nothing was written.
	Duplicate bool `json:"duplicate"`
}

// Signal sends the signal name, with data (any JSON; empty: null), to
// task id. The signal is kept for the task's life, waited for or not: a
// run of the task that suspends for it later (agent.Wait.Signal) resumes
// at once, and every later ActionRequest of the task carries it (signals).
// A task that waits for it resumes now: its next run, waiting in its
// queue's scheduled set, is made pending and a worker woken. A name sent
// already keeps the first (Duplicate): use a name per wait
// ("approve-2"). The resume is a second call (the queue's slot): a crash
// between the two leaves the signal kept and the task waiting until the
// signal is sent again or the wait times out.
//
// Errors: ErrNotFound (no record), an *EndedError (ErrTaskEnded) for a
// task that has ended, ErrSignalInvalid, ErrSignalTooLarge, ErrSignalCap,
// or a Redis error (sending again is safe).
func (c *Client) Signal(ctx context.Context, id, name string, data json.RawMessage) (SignalResult, error) {
	if id == "" {
		return SignalResult{}, &ValidationError{"id", "is empty"}
	}
	got, err := c.store.rec.Signal(ctx, id, name, data)
	if errors.Is(err, ErrTaskEnded) {
		return SignalResult{}, &EndedError{ID: id, State: got.State, Refused: "signaled"}
	}
	if err != nil {
		return SignalResult{}, err
	}
	res := SignalResult{ID: id, Name: name, State: got.State, Resumed: got.Resume, Duplicate: got.Duplicate}
	if got.Resume {
		if _, err := c.ResumeRun(ctx, id, got.Queue, got.Run); err != nil {
			return res, err
		}
	}
	return res, nil
}
