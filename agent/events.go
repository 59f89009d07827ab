package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync/atomic"
	"time"
)

// Live output of an agent: events a call reports while it runs, through
// Request.Emit (DESIGN.md "Live output from agents").
const (
	// EventProgress is an agent's report of its progress (its data is the
	// agent's own: a fraction, a step name, …).
	EventProgress = "progress"
	// EventOutput is a piece of an agent's output: an exec agent's
	// output line, an SSE event of an HTTP agent's streamed reply.
	EventOutput = "output"
	// MaxEventData caps one event's data (the record's per-event cap,
	// record.MaxOutputData): larger data is replaced by a note
	// {"truncated":true,"bytes":N}.
	MaxEventData = 64 << 10
	// EventsFDEnv names the environment variable that tells an exec agent
	// the file descriptor it may write its events to.
	EventsFDEnv = "AGENTQ_EVENTS_FD"
)

// eventsFD is the descriptor number of the events pipe in an exec agent:
// the first of exec.Cmd.ExtraFiles (0, 1, 2 are stdin, stdout, stderr).
const eventsFD = 3

// maxEventLine caps one line an exec agent writes to its events pipe:
// an event's data at MaxEventData and room for its envelope.
const maxEventLine = MaxEventData + 1024

// eventsDrainGrace is how long an exec agent's events pipe may stay
// silent once the agent's group is gone before it is closed (a process
// that left the group may keep it open). Each read that brings bytes
// extends it, so what is already in the pipe is read whole however slow
// the machine; eventsDrainMax bounds the whole drain after the group is
// gone, against a process that left the group and writes for ever.
const (
	eventsDrainGrace = 200 * time.Millisecond
	eventsDrainMax   = 5 * time.Second
)

// EmitJSON reports one live event of the call (typ EventProgress or
// EventOutput) with v as its data, marshaled to JSON; it does nothing
// when the call has no Emit. A Go-function agent reports its progress
// with it.
func (r Request) EmitJSON(typ string, v any) error {
	if r.Emit == nil {
		return nil
	}
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	r.Emit(typ, data)
	return nil
}

// emitCapped calls emit with data made valid UTF-8 (ValidJSON) and
// capped at MaxEventData: the one way an agent's events reach Emit.
func emitCapped(emit func(string, json.RawMessage), typ string, data json.RawMessage) {
	data = ValidJSON(data)
	if len(data) > MaxEventData {
		data = truncatedNote(len(data))
	}
	emit(typ, data)
}

// truncatedNote stands for data of n bytes that was over MaxEventData.
func truncatedNote(n int) json.RawMessage {
	return json.RawMessage(`{"truncated":true,"bytes":` + strconv.Itoa(n) + `}`)
}

type logKey struct{}

// WithLogger returns a context whose runs log their minor troubles (an
// exec agent's events lines that were dropped) to l, at debug level.
func WithLogger(ctx context.Context, l *slog.Logger) context.Context {
	return context.WithValue(ctx, logKey{}, l)
}

func loggerOf(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(logKey{}).(*slog.Logger); ok && l != nil {
		return l
	}
	return nil
}

// eventsPipe is an exec agent's events pipe: the agent writes JSON lines
// to w (its descriptor eventsFD), the runner drains r concurrently, so
// that the agent never blocks on it, and reports each event to emit.
type eventsPipe struct {
	r, w *os.File
	done chan struct{}
	// finishing is when finish began (unix nanoseconds), 0 before: from
	// then on every read that brings bytes extends the read deadline.
	finishing atomic.Int64
	// dropped counts lines that were not events; sample is the first one.
	dropped int
	sample  string
}

// newEventsPipe opens the pipe of a call whose events go to emit.
func newEventsPipe() (*eventsPipe, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	return &eventsPipe{r: r, w: w, done: make(chan struct{})}, nil
}

// started closes the runner's copy of the write end (the agent has its
// own) and starts draining the read end: live events to emit, steps to
// step (Request.RecordStep; nil: step lines are dropped), in the order
// the agent wrote them.
func (p *eventsPipe) started(emit func(string, json.RawMessage), step func(StepEvent)) {
	_ = p.w.Close()
	go func() {
		defer close(p.done)
		p.drain(extendingReader{p}, sink{emit: emit, step: step})
	}()
}

// sink is where a drained line goes: emit for live output, step for a
// step (called synchronously: the next line is read once it returns).
type sink struct {
	emit func(string, json.RawMessage)
	step func(StepEvent)
}

// finish waits for the drain once the agent's group is gone: it reads
// what is left in the pipe, until it has been silent for eventsDrainGrace
// (at most eventsDrainMax) when a process that left the group still holds
// the write end, then closes the pipe
// and logs the lines it dropped (once, at debug).
func (p *eventsPipe) finish(ctx context.Context, req Request) {
	p.finishing.Store(time.Now().UnixNano())
	p.extend()
	<-p.done
	_ = p.r.Close()
	if p.dropped > 0 {
		if l := loggerOf(ctx); l != nil {
			l.Debug("dropped lines of the agent's events that were not events", "task_id", req.TaskID, "agent", req.Agent,
				"dropped", p.dropped, "first", p.sample)
		}
	}
}

// extend moves the read deadline of a finishing pipe to eventsDrainGrace
// from now, never past eventsDrainMax after finish began.
func (p *eventsPipe) extend() {
	began := p.finishing.Load()
	if began == 0 {
		return
	}
	at := time.Now().Add(eventsDrainGrace)
	if limit := time.Unix(0, began).Add(eventsDrainMax); at.After(limit) {
		at = limit
	}
	_ = p.r.SetReadDeadline(at)
}

// extendingReader reads the pipe, moving a finishing pipe's deadline
// before every read: the grace measures the pipe's silence, not the
// time the drain spends on what it read, so a drain that is slow (a
// loaded machine) loses nothing that was written before the agent ended.
type extendingReader struct{ p *eventsPipe }

func (e extendingReader) Read(b []byte) (int, error) {
	e.p.extend()
	return e.p.r.Read(b)
}

// abort closes both ends of a pipe whose agent never started.
func (p *eventsPipe) abort() {
	_ = p.w.Close()
	_ = p.r.Close()
}

// drain reads events lines from r until it ends and reports each event:
// a line {"type":"progress"|"output","data":…} or a step
// {"type":"step","name":…,"data":…,"usage":…}; a line over maxEventLine
// is read on up to MaxStepLine when it is a step, and otherwise becomes
// an output event whose data is a note of its size (a step over
// MaxStepLine is reported TooLarge); any other line is dropped and
// counted.
func (p *eventsPipe) drain(r io.Reader, to sink) {
	br := bufio.NewReaderSize(r, maxEventLine)
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			line, err = p.long(br, line, to)
			if line == nil {
				if err != nil {
					return
				}
				continue
			}
		}
		if len(bytes.TrimSpace(line)) > 0 {
			p.line(line, to)
		}
		if err != nil {
			return
		}
	}
}

// long reads the rest of a line longer than the reader's buffer, whose
// start is first: a step's line is kept whole up to MaxStepLine and
// returned; any other line (or a step's over MaxStepLine) is reported by
// its size and nil is returned. err is the read's last error.
func (p *eventsPipe) long(br *bufio.Reader, first []byte, to sink) ([]byte, error) {
	step := isStepLine(first)
	name := "" // read now: first is the reader's buffer, which the reads below overwrite
	if step {
		name = stepName(first)
	}
	n := len(first)
	var whole []byte
	if step {
		whole = append(whole, first...)
	}
	line, err := first, bufio.ErrBufferFull
	for errors.Is(err, bufio.ErrBufferFull) {
		line, err = br.ReadSlice('\n')
		n += len(line)
		if step && len(whole)+len(line) <= MaxStepLine {
			whole = append(whole, line...)
		}
	}
	switch {
	case step && n <= MaxStepLine:
		return whole, err
	case step:
		if to.step != nil {
			to.step(StepEvent{Name: name, TooLarge: n})
		}
	default:
		to.emit(EventOutput, truncatedNote(n))
	}
	return nil, err
}

// isStepLine reports whether the start of an events line is a step's.
func isStepLine(b []byte) bool {
	var head struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(b, &head) == nil {
		return head.Type == EventStep
	}
	return bytes.Contains(b, []byte(`"type":"step"`)) || bytes.Contains(b, []byte(`"type": "step"`))
}

// stepName is the name a step line's start gives, when it can be read
// ("" otherwise).
func stepName(b []byte) string {
	i := bytes.Index(b, []byte(`"name"`))
	if i < 0 {
		return ""
	}
	var name string
	rest := bytes.TrimLeft(b[i+len(`"name"`):], " :")
	if j := bytes.IndexByte(rest[min(1, len(rest)):], '"'); j >= 0 && json.Unmarshal(rest[:j+2], &name) == nil {
		return name
	}
	return ""
}

// line reports one events line, or counts it dropped.
func (p *eventsPipe) line(line []byte, to sink) {
	var ev struct {
		Type  string          `json:"type"`
		Name  string          `json:"name"`
		Data  json.RawMessage `json:"data"`
		Usage json.RawMessage `json:"usage"`
	}
	err := json.Unmarshal(line, &ev)
	if err == nil && ev.Type == EventStep && to.step != nil {
		to.step(StepEvent{Name: ev.Name, Data: compact(ev.Data), Usage: ev.Usage})
		return
	}
	if err != nil || (ev.Type != EventProgress && ev.Type != EventOutput) {
		if p.dropped == 0 {
			p.sample = preview(line, 120)
		}
		p.dropped++
		return
	}
	emitCapped(to.emit, ev.Type, compact(ev.Data))
}

// compact is data on one line (null when empty): the line's own bytes
// may carry blanks; the record keeps one line per event.
func compact(data json.RawMessage) json.RawMessage {
	if len(data) == 0 {
		return json.RawMessage("null")
	}
	var buf bytes.Buffer
	if json.Compact(&buf, data) == nil {
		return buf.Bytes()
	}
	return data
}
