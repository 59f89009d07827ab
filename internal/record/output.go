package record

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/agentq/agentq/internal/redisx"
	"github.com/agentq/agentq/internal/rkeys"
)

// A task's live output is bounded: at most MaxOutputEvents events and
// MaxOutputBytes bytes of their JSON, each event's data at most
// MaxOutputData bytes (larger data is replaced by a note saying how large
// it was). What goes over the caps is dropped, and one
// EventOutputTruncated event says so. The output list lives as long as
// the task's record.
const (
	MaxOutputEvents = 1000
	MaxOutputBytes  = 1 << 20
	MaxOutputData   = 64 << 10
)

// outputScript is Store.Output (lua/output.lua documents its KEYS, ARGV
// and replies).
var outputScript = newScript("output.lua")

// Output appends live output events (EventProgress or EventOutput, with
// their Data) of d's run to the task's output list, numbered from the
// record's sequence and announced like its history events, within the
// task's caps. It answers how many it kept and, writing nothing, Stale,
// Ended or Canceled when the run is no longer the task's live one; a task
// with no record is Ended.
func (s *Store) Output(ctx context.Context, d Delivery, evs []Event) (Outcome, int, error) {
	if len(evs) == 0 {
		return Applied, 0, nil
	}
	cut := Event{At: s.now().UTC(), Event: EventOutputTruncated, Attempt: d.Attempt, Restart: d.Restarts,
		Error: fmt.Sprintf("output over its caps (%d events, %d bytes): the rest was dropped", MaxOutputEvents, MaxOutputBytes)}
	args := make([]any, 0, 4+len(evs))
	args = append(args, d.Run, MaxOutputEvents, MaxOutputBytes, string(cut.Marshal()))
	for _, ev := range evs {
		ev.Seq = 0
		ev.At = s.stamp(ev.At)
		if len(ev.Data) > MaxOutputData {
			ev.Data, _ = json.Marshal(map[string]any{"truncated": true, "bytes": len(ev.Data)})
		}
		args = append(args, string(ev.Marshal()))
	}
	code, rest, err := reply(s.runner.Run(ctx, outputScript, []string{rkeys.Task(d.ID), rkeys.TaskOutput(d.ID)}, args...))
	if err != nil {
		return Applied, 0, fmt.Errorf("record: output of %s: %w", d.ID, err)
	}
	switch code {
	case CodeApplied:
		kept := 0
		if len(rest) > 0 {
			n, _ := rest[0].(int64)
			kept = int(n)
		}
		return Applied, kept, nil
	case CodeStale:
		return Stale, 0, nil
	case CodeCanceled:
		return Canceled, 0, nil
	}
	return Ended, 0, nil
}

// Events returns task id's history and output events numbered above
// after, in sequence order, and the task's state ("" when it has no
// record).
func (s *Store) Events(ctx context.Context, id string, after int64) ([]Event, State, error) {
	evs, state, _, err := s.EventsFrom(ctx, id, after, 0)
	return evs, state, err
}

// EventsFrom is Events reading the output list from index outFrom on (a
// follower's cursor: the output list only grows, so the entries before
// what it read last time were read then), and returns the cursor for the
// next read. The history (at most HistoryHead + 1 + HistoryTail events) is
// read whole. A follower of a chatty task then reads each output event
// once, not once per wake.
func (s *Store) EventsFrom(ctx context.Context, id string, after, outFrom int64) ([]Event, State, int64, error) {
	res, err := s.pipeline(ctx, []redisx.Call{
		{Cmd: []any{"hmget", rkeys.Task(id), FieldState, FieldFirstEvent}},
		{Cmd: []any{"lrange", rkeys.TaskHistory(id), 0, -1}},
		{Cmd: []any{"lrange", rkeys.TaskOutput(id), outFrom, -1}},
	})
	if err == nil {
		err = firstErr(res)
	}
	if err != nil {
		return nil, "", outFrom, fmt.Errorf("record: events of %s: %w", id, err)
	}
	var state, first string
	if f, ok := res[0].Val.([]any); ok && len(f) == 2 {
		state, _ = f[0].(string)
		first, _ = f[1].(string)
	}
	h, o := strs(res[1].Val), strs(res[2].Val)
	var out []Event
	for _, ev := range append(withFirst(first, h), ParseEvents(o)...) {
		if ev.Seq > after {
			out = append(out, ev)
		}
	}
	slices.SortStableFunc(out, func(a, b Event) int { return int(a.Seq - b.Seq) })
	return out, State(state), outFrom + int64(len(o)), nil
}

// ParseSeq reads a sequence number ("" and anything else that is not a
// number are 0).
func ParseSeq(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// Terminal reports whether ev ends its task (succeeded, dead_lettered,
// task_canceled).
func (ev Event) Terminal() bool {
	_, ok := TerminalEvents[ev.Event]
	return ok
}

// watchScript is Store.Watch (lua/watch.lua).
var watchScript = newScript("watch.lua")

// Watch marks task id watched: from now on every event recorded for it is
// announced on its shard channel (rkeys.TaskEvents). Subscribe to the
// channel first, then Watch, then read the events (Events): every event
// is then either read or announced. An unwatched task's events are not
// announced (it costs Redis nothing more); a task with no record is
// ErrNotFound.
func (s *Store) Watch(ctx context.Context, id string) error {
	code, _, err := reply(s.runner.Run(ctx, watchScript, []string{rkeys.Task(id)}))
	if err != nil {
		return fmt.Errorf("record: watch %s: %w", id, err)
	}
	if code == CodeMissing {
		return fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return nil
}
