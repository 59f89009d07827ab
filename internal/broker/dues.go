package broker

import (
	"math"
	"sync"
	"time"
)

// Dues is what a worker knows of when its queues' scheduled and retry sets
// next have a task due, so that its forwarder (asynq's, ticking every
// worker.forward_interval) only asks Redis when something may be due: an
// idle worker's forwarder then costs Redis nothing between its periodic
// checks.
//
// A set's next due time is learnt from each real check (the forward script
// replies the earliest score left), and lowered by what the worker hears
// of: its own retries (asynq's retry script, through AsynqClient) and
// producers' announcements of scheduled tasks (rkeys.DueChannel). What it
// cannot hear of (a retry another worker scheduled and then died; a
// producer that is not agentq's) is found by the periodic check: Recheck,
// which the fleet sends once per worker.poll_interval through the one
// worker that holds the queue's forward lease (internal/wake's Checks),
// and each worker's own backstop, every `every`.
type Dues struct {
	every time.Duration
	now   func() time.Time

	mu   sync.Mutex
	sets map[string]*dueSet // by asynq key of the scheduled or retry set
}

type dueSet struct {
	known    bool      // a check has told next
	next     int64     // earliest score (Unix s) left; math.MaxInt64: none
	checked  time.Time // when the last check was sent
	checking bool      // a check is under way
	lowered  int64     // the lowest Lower heard while checking; MaxInt64: none
}

// NewDues returns a Dues that checks every set at least every `every`;
// now is the clock (nil: time.Now).
func NewDues(every time.Duration, now func() time.Time) *Dues {
	if now == nil {
		now = time.Now
	}
	return &Dues{every: every, now: now, sets: map[string]*dueSet{}}
}

func (d *Dues) set(key string) *dueSet {
	s := d.sets[key]
	if s == nil {
		s = &dueSet{next: math.MaxInt64, lowered: math.MaxInt64}
		d.sets[key] = s
	}
	return s
}

// Begin decides whether the forwarder asks Redis about set key at nowUnix
// (asynq's clock, Unix seconds: a task is due when its score ≤ nowUnix). It
// returns false when nothing can be due and the last check is recent; true
// starts a check, which Done must end.
func (d *Dues) Begin(key string, nowUnix int64) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.set(key)
	if s.known && nowUnix < s.next && d.now().Sub(s.checked) < d.every {
		return false
	}
	s.checking, s.lowered, s.checked = true, math.MaxInt64, d.now()
	return true
}

// Done ends a check of key: next is the earliest score left (-1: the set
// is empty); ok false (the check failed) makes the next tick check again.
func (d *Dues) Done(key string, next int64, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.set(key)
	s.checking = false
	if !ok {
		s.known = false
		return
	}
	if next < 0 {
		next = math.MaxInt64
	}
	// A task added while the check ran may be missing from its reply.
	s.known, s.next = true, min(next, s.lowered)
}

// Recheck makes the next forwarder tick ask Redis about each of keys (the
// scheduled or retry sets), whatever this worker knows of them: the
// fleet's periodic check, for what no worker heard of.
func (d *Dues) Recheck(keys ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, k := range keys {
		d.set(k).known = false
	}
}

// Lower records that set key has a task due at at (Unix s).
func (d *Dues) Lower(key string, at int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.set(key)
	s.next = min(s.next, at)
	if s.checking {
		s.lowered = min(s.lowered, at)
	}
}
