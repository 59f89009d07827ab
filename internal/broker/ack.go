package broker

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Ack is a write that lands with asynq's acknowledgement of a delivery: a
// handler that has a task's outcome to record returns to asynq at once and
// leaves the write here (Acks.Put); the AsynqClient runs it in the same
// script as asynq's done, or on its own just before any other answer asynq
// gives the delivery.
type Ack interface {
	// WithDone runs the write and asynq's done script (its keys and
	// arguments, as asynq passes them) as one, and answers as the done
	// script would (asynq's processor reads only the error). With next
	// (nil: none) the same script also hands out the queue's next run,
	// which WithDone sets in next (Next.SetFetched).
	WithDone(ctx context.Context, keys []string, args []any, next *Next) *redis.Cmd
	// Alone runs the write by itself: asynq is about to answer the
	// delivery otherwise (a retry or a requeue, when the task's context
	// ended as its handler returned; a completed task kept for retention).
	Alone(ctx context.Context)
}

// Acks holds the writes that wait for asynq's acknowledgement of their
// delivery, by task ID. It is safe for concurrent use.
type Acks struct {
	mu    sync.Mutex
	m     map[string]pendingAck
	n     atomic.Int64 // len(m), read without the lock
	puts  int
	now   func() time.Time
	onOld func(id string) // hears of a write dropped by the sweep
}

type pendingAck struct {
	ack Ack
	at  time.Time
}

// ackMaxAge is how long a write may wait for its acknowledgement before
// the sweep drops it: asynq acknowledges a delivery right after its handler
// returns, or never (its lease was lost: the task runs again elsewhere).
const ackMaxAge = 5 * time.Minute

// sweepEvery is how many Puts go between two sweeps.
const sweepEvery = 4096

// NewAcks returns an empty Acks; onOld (may be nil) hears of each write
// dropped because asynq never answered its delivery.
func NewAcks(onOld func(id string)) *Acks {
	if onOld == nil {
		onOld = func(string) {}
	}
	return &Acks{m: map[string]pendingAck{}, now: time.Now, onOld: onOld}
}

// Put leaves a write for the acknowledgement of task id's delivery, which
// the handler is about to return (with no error) to asynq.
func (a *Acks) Put(id string, ack Ack) {
	now := a.now()
	var old []string
	a.mu.Lock()
	a.m[id] = pendingAck{ack: ack, at: now}
	if a.puts++; a.puts%sweepEvery == 0 {
		for k, p := range a.m {
			if now.Sub(p.at) > ackMaxAge {
				delete(a.m, k)
				old = append(old, k)
			}
		}
	}
	a.n.Store(int64(len(a.m)))
	a.mu.Unlock()
	for _, k := range old {
		a.onOld(k)
	}
}

// Forget drops a write left for task id that asynq never acknowledged (a
// new delivery of the task begins: an earlier one's lease was lost).
func (a *Acks) Forget(id string) { a.take(id) }

// Drain runs, alone, every write still waiting for its acknowledgement
// (the worker has stopped: asynq will not acknowledge them), and returns
// how many it ran.
func (a *Acks) Drain(ctx context.Context) int {
	if a.Len() == 0 {
		return 0
	}
	a.mu.Lock()
	left := a.m
	a.m = map[string]pendingAck{}
	a.n.Store(0)
	a.mu.Unlock()
	for _, p := range left {
		p.ack.Alone(ctx)
	}
	return len(left)
}

// take removes and returns the write left for task id, or nil.
func (a *Acks) take(id string) Ack {
	if a == nil || a.n.Load() == 0 {
		return nil
	}
	a.mu.Lock()
	p, ok := a.m[id]
	if ok {
		delete(a.m, id)
		a.n.Store(int64(len(a.m)))
	}
	a.mu.Unlock()
	if !ok {
		return nil
	}
	return p.ack
}

// Len is how many writes wait for their acknowledgement.
func (a *Acks) Len() int {
	if a == nil {
		return 0
	}
	return int(a.n.Load())
}

// taskOf returns the task ID of the first of asynq's task hash keys
// ("asynq:{QUEUE}:t:ID") in keys, or "".
func taskOf(keys []string) string {
	for _, k := range keys {
		if !strings.HasPrefix(k, "asynq:{") {
			continue
		}
		if i := strings.Index(k, "}:t:"); i > 0 {
			return k[i+len("}:t:"):]
		}
	}
	return ""
}
