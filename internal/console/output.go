package console

import (
	"context"
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/rkeys"
)

// maxShownOutput is how much of its agent's live output an ended task's
// page shows: its last 32 KiB, with a note saying what is left out (the
// API replays it all). Its result needs no such bound: the record keeps
// at most record.MaxStoredResult of it.
const maxShownOutput = 32 << 10

// taskOutput is what a task's agent reported while it ran (its output
// list: record.EventProgress and EventOutput), for the page of a task
// that ended: the last progress, and the output events' data one a line
// (a JSON string as its text), the last maxShownOutput bytes of it.
type taskOutput struct {
	Progress        string // the last progress's data, indented
	ProgressAt      time.Time
	ProgressAttempt int
	Text            string // the output shown
	Events          int    // output events
	Hidden          int    // the first Hidden of them are not shown …
	HiddenBytes     int    // … nor these bytes of the one shown cut, if any
	Over            bool   // the task went over its output caps: what came after was dropped
	Err             string // the output could not be read
}

// readOutput reads task id's output list: nil when it is empty.
func (c *Console) readOutput(ctx context.Context, id string) *taskOutput {
	raw, err := c.Redis.LRange(ctx, rkeys.TaskOutput(id), 0, -1).Result()
	if err != nil {
		return &taskOutput{Err: err.Error()}
	}
	if len(raw) == 0 {
		return nil
	}
	return outputOf(record.ParseEvents(raw))
}

// outputOf is the taskOutput of the output events evs, oldest first.
func outputOf(evs []record.Event) *taskOutput {
	out := &taskOutput{}
	var lines []string
	for _, ev := range evs {
		switch ev.Event {
		case record.EventProgress:
			out.Progress, out.ProgressAt, out.ProgressAttempt = prettyJSON(ev.Data), ev.At, ev.Attempt
		case record.EventOutput:
			lines = append(lines, outputLine(ev.Data))
		case record.EventOutputTruncated:
			out.Over = true
		}
	}
	out.Events = len(lines)
	out.Text, out.Hidden, out.HiddenBytes = tail(lines, maxShownOutput)
	return out
}

// outputLine is an output event's data as a line: a JSON string as its
// text, anything else as its JSON, compact (null when it has none).
func outputLine(data json.RawMessage) string {
	var s string
	if json.Unmarshal(data, &s) == nil {
		return s
	}
	if len(data) == 0 {
		return "null"
	}
	return rewriteJSON(data, "")
}

// tail joins the last lines (one a line) that fit in limit bytes: the
// text, how many lines before them are left out, and how many bytes of
// the first line shown are cut (when even the last line is over limit).
func tail(lines []string, limit int) (string, int, int) {
	size, from := 0, len(lines)
	for from > 0 && size+len(lines[from-1])+1 <= limit {
		from--
		size += len(lines[from]) + 1
	}
	if from == len(lines) && from > 0 { // the last line alone is over limit
		last := lines[from-1]
		cut := len(last) - limit
		for cut < len(last) && !utf8.RuneStart(last[cut]) {
			cut++
		}
		return last[cut:], from - 1, cut
	}
	return strings.Join(lines[from:], "\n"), from, 0
}
