package delivery

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/internal/record"
)

// Live output of a call (DESIGN.md "Live output from agents"): the events
// an agent emits (agent.Request.Emit) are batched, at most outputBatch
// events per write and at most outputWindow after the first of a batch,
// and written to the task's output with record.Store.Output for the
// call's delivery. A call that emits nothing starts nothing and writes
// nothing.
const (
	outputWindow       = 50 * time.Millisecond
	outputBatch        = 64
	outputWriteTimeout = 5 * time.Second
)

// outputWriter batches one call's live output events into the record.
// emit never blocks; close writes what is left and returns once it is
// written, so that a call's output precedes its outcome in the task's
// events. Once a write is refused (the run is no longer live: Stale,
// Ended, Canceled) or the task's caps are reached, the call's later
// events are dropped without a write. Events beyond what the caps could
// keep in any case are not buffered either, so a flooding agent costs
// bounded memory.
type outputWriter struct {
	rec completer
	d   record.Delivery
	ctx context.Context // the call's, without its cancel: the last flush outlives a stop
	log *taskLog

	mu      sync.Mutex
	pending []record.Event
	bytes   int
	running bool // the loop runs (the call emitted)
	closed  bool
	stopped bool // refused or capped: drop the rest
	dropped int

	kick   chan struct{} // events are pending
	full   chan struct{} // a batch is full
	done   chan struct{} // closed by close
	exited chan struct{} // closed by the loop
}

// newOutput returns the writer of a call of delivery d.
func (p *Executor) newOutput(ctx context.Context, log *taskLog, d record.Delivery) *outputWriter {
	return &outputWriter{rec: p.rec, d: d, ctx: context.WithoutCancel(ctx), log: log}
}

// emit takes one event (agent.Request.Emit); it never blocks.
func (w *outputWriter) emit(typ string, data json.RawMessage) {
	if typ != agent.EventProgress && typ != agent.EventOutput {
		return
	}
	if len(data) == 0 {
		data = json.RawMessage("null")
	}
	// The attempt and restart that sent it, as the attempt's outcome
	// names them.
	ev := record.Event{At: time.Now().UTC(), Event: typ, Attempt: w.d.Attempt, Restart: w.d.Restarts,
		Data: append(json.RawMessage(nil), data...)}
	w.mu.Lock()
	if w.closed || w.stopped || len(w.pending) > record.MaxOutputEvents || w.bytes > record.MaxOutputBytes {
		w.dropped++
		w.mu.Unlock()
		return
	}
	w.pending = append(w.pending, ev)
	w.bytes += len(data)
	if !w.running {
		w.running = true
		w.kick, w.full = make(chan struct{}, 1), make(chan struct{}, 1)
		w.done, w.exited = make(chan struct{}), make(chan struct{})
		go w.loop()
	}
	n := len(w.pending)
	w.mu.Unlock()
	signal(w.kick)
	if n >= outputBatch {
		signal(w.full)
	}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// close writes the events still pending and stops the writer; events
// emitted later are dropped.
func (w *outputWriter) close() {
	w.mu.Lock()
	running := w.running
	w.closed = true
	w.mu.Unlock()
	if !running {
		return
	}
	close(w.done)
	<-w.exited
	w.mu.Lock()
	dropped := w.dropped
	w.mu.Unlock()
	if dropped > 0 {
		w.log.Debug("dropped live output events of the call", "dropped", dropped)
	}
}

// loop writes the pending events: a batch once it is full or
// outputWindow after its first event, the rest when the writer closes.
func (w *outputWriter) loop() {
	defer close(w.exited)
	for {
		select {
		case <-w.kick:
		case <-w.done:
			w.flush()
			return
		}
		t := time.NewTimer(outputWindow)
		select {
		case <-w.full:
		case <-t.C:
		case <-w.done:
		}
		t.Stop()
		w.flush()
	}
}

// flush writes every pending event, outputBatch a write.
func (w *outputWriter) flush() {
	for {
		w.mu.Lock()
		if w.stopped || len(w.pending) == 0 {
			w.pending, w.bytes = nil, 0
			w.mu.Unlock()
			return
		}
		n := min(len(w.pending), outputBatch)
		batch := w.pending[:n:n]
		w.pending = w.pending[n:]
		for _, ev := range batch {
			w.bytes -= len(ev.Data)
		}
		w.mu.Unlock()
		w.write(batch)
	}
}

// write writes one batch; a refusal or the caps stop the writer.
func (w *outputWriter) write(batch []record.Event) {
	ctx, cancel := context.WithTimeout(w.ctx, outputWriteTimeout)
	defer cancel()
	out, kept, err := w.rec.output(ctx, w.d, batch)
	stop := false
	switch {
	case err != nil:
		// Live output is not worth holding the call for Redis: the batch
		// is lost, later ones are tried.
		w.log.Warn("could not write the agent's live output; events dropped", "events", len(batch), "err", err)
	case out != record.Applied:
		w.log.Debug("live output refused: the run is no longer live", "outcome", out)
		stop = true
	case kept < len(batch):
		w.log.Debug("live output over the task's caps; the rest of the call's is dropped", "kept", kept)
		stop = true
	}
	if stop {
		w.mu.Lock()
		w.stopped = true
		w.dropped += len(w.pending)
		w.pending, w.bytes = nil, 0
		w.mu.Unlock()
	}
}
