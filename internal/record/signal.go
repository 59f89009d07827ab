package record

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentq/agentq/internal/rkeys"
)

// A task's signals are bounded: a name is 1 to MaxSignalName characters
// of [A-Za-z0-9._:-], its data at most MaxSignalBytes bytes of JSON, and a
// task keeps at most MaxSignals signals (they are kept for its life).
const (
	MaxSignals     = 64
	MaxSignalBytes = 64 << 10
	MaxSignalName  = 128
)

// ErrSignalInvalid: a signal's name or data is not acceptable (a
// *SignalInvalidError says which); ErrSignalCap: the task has MaxSignals
// signals already; ErrSignalTooLarge: its data is over MaxSignalBytes.
var (
	ErrSignalInvalid  = errors.New("invalid signal")
	ErrSignalCap      = errors.New("signal cap reached")
	ErrSignalTooLarge = errors.New("signal data too large")
)

// SignalResult is what Signal did: State is the task's state, Resume
// that the task waits for this signal (the caller makes its run, Run of
// Queue, pending: broker.RunNow), Duplicate that a signal of this name
// was sent already (nothing written: the first is kept).
type SignalResult struct {
	State     State
	Resume    bool
	Duplicate bool
	Run       int
	Queue     string
}

// CheckSignalName returns an error wrapping ErrSignalInvalid unless name
// is 1 to MaxSignalName characters of [A-Za-z0-9._:-].
func CheckSignalName(name string) error {
	if name == "" || len(name) > MaxSignalName {
		return fmt.Errorf("%w: a signal's name is 1 to %d characters, not %d", ErrSignalInvalid, MaxSignalName, len(name))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return fmt.Errorf("%w: a signal's name has only the characters A-Z a-z 0-9 . _ : - (%q)", ErrSignalInvalid, name)
		}
	}
	return nil
}

// signalScript is Store.Signal (lua/signal.lua documents its KEYS, ARGV
// and replies).
var signalScript = newScript("signal.lua")

// Signal sends the signal name with data (JSON; empty: null) to task id:
// kept in its signals hash for the task's life, counted, and an event
// signal in its history, in one script. A name sent already keeps the
// first (Duplicate). The result says whether the task waits for it
// (Resume): the caller then makes the task's run pending. Errors:
// ErrNotFound (no record), ErrTaskEnded (the task has ended; State in the
// result says how), ErrSignalInvalid (name, or data not JSON),
// ErrSignalTooLarge, ErrSignalCap, or Redis's (sending again is safe).
func (s *Store) Signal(ctx context.Context, id, name string, data json.RawMessage) (SignalResult, error) {
	if err := CheckSignalName(name); err != nil {
		return SignalResult{}, err
	}
	if len(data) == 0 {
		data = json.RawMessage("null")
	}
	if len(data) > MaxSignalBytes {
		return SignalResult{}, fmt.Errorf("%w: %d bytes, over the cap of %d", ErrSignalTooLarge, len(data), MaxSignalBytes)
	}
	if !json.Valid(data) {
		return SignalResult{}, fmt.Errorf("%w: its data is not JSON", ErrSignalInvalid)
	}
	ev := Event{At: s.stamp(time.Time{}), Event: EventSignal, Name: name, Bytes: len(data)}
	ks := s.outboxKeys(id)
	ks = append([]string{ks[0], ks[1], rkeys.TaskSignals(id)}, ks[2:]...)
	v, err := s.runner.Run(ctx, signalScript, ks, name, string(data), string(ev.Marshal()), MaxSignals)
	if r, ok := v.([]any); ok && err == nil && len(r) > 6 {
		s.outboxed(ctx, id, r[6])
	}
	code, rest, err := reply(v, err)
	if err != nil {
		return SignalResult{}, fmt.Errorf("record: signal %q of %s: %w", name, id, err)
	}
	return signalReply(id, name, code, rest)
}

// signalReply maps signal.lua's reply.
func signalReply(id, name string, code Code, rest []any) (SignalResult, error) {
	str := func(i int) string {
		if i < len(rest) {
			s, _ := rest[i].(string)
			return s
		}
		return ""
	}
	num := func(i int) int64 {
		if i < len(rest) {
			n, _ := rest[i].(int64)
			return n
		}
		return 0
	}
	switch code {
	case CodeApplied, CodeRepeat:
		return SignalResult{State: State(str(0)), Resume: num(1) == 1, Run: int(num(2)), Queue: str(3),
			Duplicate: code == CodeRepeat}, nil
	case CodeMissing:
		return SignalResult{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	case CodeEnded:
		return SignalResult{State: State(str(0))}, fmt.Errorf("%w: %s is %s", ErrTaskEnded, id, str(0))
	case CodeCap:
		return SignalResult{}, fmt.Errorf("%w: task %s has %d signals, the most a task keeps; signal %q not kept", ErrSignalCap, id, num(0), name)
	}
	return SignalResult{}, fmt.Errorf("record: signal %q of %s: unexpected reply code %d", name, id, code)
}

// Signals reads task id's signals (name -> data; empty when it has none)
// in one command.
func (s *Store) Signals(ctx context.Context, id string) (map[string]json.RawMessage, error) {
	return s.readHash(ctx, rkeys.TaskSignals(id), "signals", id)
}
