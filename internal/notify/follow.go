package notify

import (
	"context"
	"fmt"
	"time"

	"github.com/agentq/agentq/internal/record"
)

// FollowOptions are Follow's optional hooks.
type FollowOptions struct {
	// KeepAlive, when positive, is how long Follow may wait for an event
	// before it calls Idle (an event stream's keep-alive comment).
	KeepAlive time.Duration
	// Idle is called after KeepAlive without an event; an error ends Follow.
	Idle func() error
}

// Follow calls emit with each of task id's events numbered above after,
// in order, as they are recorded, until the task has ended and its last
// event was emitted (nil), emit or Idle fails (that error), ctx ends
// (ctx's error) or the Hub stops (ErrStopped). A task that has already
// ended has its events replayed; an unknown task is record.ErrNotFound.
func (h *Hub) Follow(ctx context.Context, id string, after int64, emit func(record.Event) error, o FollowOptions) error {
	sub, err := h.Subscribe(ctx, id)
	if err != nil {
		return err
	}
	defer sub.Close()
	var tick <-chan time.Time
	if o.KeepAlive > 0 && o.Idle != nil {
		t := time.NewTicker(o.KeepAlive)
		defer t.Stop()
		tick = t.C
	}
	// read is the last event read from the record: what the Sub is told it
	// has seen. Not after, which the caller chose: a number the task has not
	// reached would make the Hub drop the task's next announcements, for
	// every waiter of the task in this process.
	var read int64
	var outFrom int64 // the output list's cursor: each output event is read once
	for {
		evs, state, next, err := h.rec.EventsFrom(ctx, id, after, outFrom)
		if err != nil {
			return err
		}
		outFrom = next
		if state == "" {
			return fmt.Errorf("%w: %s", record.ErrNotFound, id)
		}
		for _, ev := range evs {
			if err := emit(ev); err != nil {
				return err
			}
			after, read = ev.Seq, ev.Seq
		}
		if state.Terminal() {
			return nil
		}
		sub.Seen(read)
		if err := h.sleep(ctx, sub, tick, o.Idle); err != nil {
			return err
		}
	}
}

// Wait returns task id's state once it has ended (succeeded,
// dead_lettered, canceled), or ctx's error (ErrStopped when the Hub
// stops). An unknown task is record.ErrNotFound.
func (h *Hub) Wait(ctx context.Context, id string) (record.State, error) {
	sub, err := h.Subscribe(ctx, id)
	if err != nil {
		return "", err
	}
	defer sub.Close()
	for {
		state, seq, err := h.rec.StateSeq(ctx, id)
		if err != nil {
			return "", fmt.Errorf("notify: %w", err)
		}
		if state == "" {
			return "", fmt.Errorf("%w: %s", record.ErrNotFound, id)
		}
		if state.Terminal() {
			return state, nil
		}
		sub.Seen(seq)
		if err := h.sleep(ctx, sub, nil, nil); err != nil {
			return "", err
		}
	}
}

// sleep waits for sub's wake-up, ctx's end or the Hub's stop, calling idle
// at each tick.
func (h *Hub) sleep(ctx context.Context, sub *Sub, tick <-chan time.Time, idle func() error) error {
	for {
		select {
		case <-sub.C():
			if h.stopped() {
				return ErrStopped
			}
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-h.ctx.Done():
			return ErrStopped
		case <-tick:
			if err := idle(); err != nil {
				return err
			}
		}
	}
}

// Exists reports whether task id has a record, read in the arrivals'
// shared pipelines (an event stream's check before it begins).
func (h *Hub) Exists(ctx context.Context, id string) (bool, error) {
	return h.rec.Exists(ctx, id)
}
