package redisx

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Group commit: concurrent callers' script calls ride in one pipelined
// round trip, and each caller still gets its own reply only once its write
// is applied in Redis.
//
// There is no background goroutine. The first caller to find no flush in
// progress leads: it sends every call queued so far in one pipeline. Calls
// arriving meanwhile queue up; when the leader's round trip returns it
// hands the lead to the oldest queued caller, which sends the whole queue,
// and so on. A lone caller therefore pays one plain round trip (no added
// latency), and N concurrent callers pay about one round trip between
// them, which is what lets the worker's per-task bookkeeping keep up with
// asynq itself. With BatchOptions.Flushes above one, up to that many
// leaders' round trips are in flight at once (a caller that finds fewer
// leads at once); a leader takes only the queued calls no other caller
// leads, and on its return hands its flush to the oldest of the rest. A
// call sent with RunMerged joins the other calls of its Merger in the
// flush as one merged script call.
//
// Calls that do not overlap would still go one per round trip: a worker's
// quick tasks end one after another, each a little after the last, and a
// round trip (a write and a read on both sides, Redis's event loop) costs
// both Redis and the worker more CPU than the script it carries. So a
// leader that sees calls arriving less than Linger apart waits briefly for
// the next few before it sends: until LingerCalls are queued, or their
// expected arrival at the average gap has passed, never longer than Linger.
// The wait is about LingerCalls-1 gaps, so at any rate it keeps only about
// that many more callers waiting. The gap is a moving average of the
// arrivals, so a lone or occasional caller never waits; and a wait that
// gathered nobody (the callers take turns, e.g. one task at a time) makes
// the next leaders skip waiting, for twice as many leads each time it
// happens again (at most 64), until a wait gathers company.

// DefaultBatchTimeout bounds one flush when NewBatcher is given none.
const DefaultBatchTimeout = 3 * time.Second

// DefaultMaxBatch caps the calls sent in one pipeline when NewBatcher is
// given none.
const DefaultMaxBatch = 512

// DefaultLinger bounds a leader's wait for more calls when NewBatcher is
// given none, and DefaultLingerCalls is how many calls it waits for.
const (
	DefaultLinger      = 2 * time.Millisecond
	DefaultLingerCalls = 4
)

// maxLingerSkip bounds how many leads skip waiting after waits that
// gathered nobody.
const maxLingerSkip = 64

// Batcher is a Runner that sends script calls in shared pipelines. The
// zero value is not usable; create one with NewBatcher. It is safe for
// concurrent use.
type Batcher struct {
	rdb     redis.UniversalClient
	timeout time.Duration
	max     int
	rep     Replication

	linger      time.Duration // 0: never wait
	lingerCalls int

	flushes int // how many flushes may be in flight at once

	mu        sync.Mutex
	pending   []*call
	flushing  int           // flushes in flight
	last      time.Time     // the latest call's arrival
	gap       time.Duration // moving average of the gaps between arrivals
	lingering bool          // a leader waits for company; full wakes it
	full      chan struct{} // (buffered 1) LingerCalls are queued
	skip      int           // leads left that do not wait (waits gathered nobody)
	backoff   int           // the next skip after a wait that gathers nobody
}

// BatchOptions configure a Batcher. Zero values mean the defaults.
type BatchOptions struct {
	// Timeout bounds each flush (one pipelined round trip plus, after a
	// Redis restart, the reloading of scripts); zero means
	// DefaultBatchTimeout.
	// Callers' own contexts do not cut a flush short: a call that is in a
	// pipeline already may be applied, so its caller waits for the answer.
	Timeout time.Duration
	// MaxBatch caps the calls in one pipeline; zero means DefaultMaxBatch.
	MaxBatch int
	// Replication, when On, makes each flush WAIT for replicas on every
	// master it wrote to (PipelinedReplicated). Zero → no WAIT.
	Replication Replication
	// Linger bounds how long a leader waits for more calls when calls
	// arrive less than Linger apart on average; zero means DefaultLinger,
	// negative never waits (one round trip per call that finds no flush
	// in progress).
	Linger time.Duration
	// LingerCalls is how many calls a lingering leader waits for (their
	// expected arrival at the average gap); zero means DefaultLingerCalls.
	LingerCalls int
	// Flushes is how many pipelines may be in flight at once, each on its
	// own connection; zero means 1. With more than one, a caller that
	// finds fewer flushes in flight leads at once instead of queueing
	// behind the flush in progress, so that Redis applies one pipeline
	// while this process writes the next and reads the last: with one,
	// the two take turns. Concurrent callers' calls may then be applied in
	// either order (one caller's calls never are: each waits for its
	// reply). A leader lingers only while no other leader does.
	Flushes int
}

// NewBatcher returns a Batcher on rdb.
func NewBatcher(rdb redis.UniversalClient, o BatchOptions) *Batcher {
	if o.Timeout <= 0 {
		o.Timeout = DefaultBatchTimeout
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.Replication.On() {
		o.Timeout += o.Replication.timeout()
	}
	if o.Linger == 0 {
		o.Linger = DefaultLinger
	}
	if o.LingerCalls <= 0 {
		o.LingerCalls = DefaultLingerCalls
	}
	return &Batcher{rdb: rdb, timeout: o.Timeout, max: o.MaxBatch, rep: o.Replication, flushes: max(o.Flushes, 1),
		linger: max(o.Linger, 0), lingerCalls: o.LingerCalls, full: make(chan struct{}, 1), backoff: 1}
}

type call struct {
	merge  Merger // when not nil, script's calls of one flush merge (RunMerged)
	script *redis.Script
	keys   []string
	args   []any
	res    any
	err    error
	// group, when not nil, is a RunCalls unit (script is then nil): its
	// calls go together, in order, in one pipeline; results are theirs.
	group   []Call
	results []Result
	// wake is closed when res/err are set (finished) or, before that,
	// when this call is handed the lead (led, set first under b.mu): one
	// channel per call, not one for each.
	wake     chan struct{}
	led      bool
	taken    bool // in a leader's batch
	finished bool
}

// Run runs script with keys and args like (*redis.Script).Run and returns its
// reply, sharing the round trip with concurrent calls. An error of ctx before
// the call is queued returns at once; once queued, Run waits for the reply
// (bounded by the Batcher's timeout).
func (b *Batcher) Run(ctx context.Context, script *redis.Script, keys []string, args ...any) (any, error) {
	return b.do(ctx, &call{script: script, keys: keys, args: args})
}

// Merger merges the calls of one kind (one script) that meet in a flush
// into fewer script calls, and splits each merged call's reply back into
// the calls' own. A Merger is compared by identity: use one value per
// kind.
type Merger interface {
	// Merge is the one call that does what calls do, in order (at least
	// one, at most MaxMerge).
	Merge(calls []Call) Call
	// Split is the n calls' replies from the reply of their merged call.
	Split(r Result, n int) []Result
	// MaxMerge caps the calls in one merged call.
	MaxMerge() int
}

// RunMerged runs c, whose kind m merges: the calls of kind m in one flush
// go as few merged script calls (m.Merge), and c's reply is its part of
// its merged call's (m.Split), even when c went alone.
func (b *Batcher) RunMerged(ctx context.Context, m Merger, c Call) (any, error) {
	return b.do(ctx, &call{merge: m, script: c.Script, keys: c.Keys, args: c.Args})
}

// RunCalls runs calls together, in order, in one pipeline shared with
// concurrent callers (a MULTI … EXEC unit, say), and returns each call's
// result; err is set only when ctx ended before the calls were queued.
func (b *Batcher) RunCalls(ctx context.Context, calls []Call) ([]Result, error) {
	c := &call{group: calls}
	if _, err := b.do(ctx, c); err != nil {
		return nil, err
	}
	return c.results, nil
}

func (b *Batcher) do(ctx context.Context, c *call) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.wake = make(chan struct{})
	b.mu.Lock()
	b.pending = append(b.pending, c)
	b.arrived(time.Now())
	if b.lingering && len(b.pending) >= b.lingerCalls {
		select {
		case b.full <- struct{}{}:
		default:
		}
	}
	if b.flushing >= b.flushes {
		b.mu.Unlock()
		<-c.wake
		if c.finished {
			return c.res, c.err
		}
		// A leader handed over its flush: lead it below.
		b.mu.Lock()
	} else {
		b.flushing++
	}
	if !b.lingering {
		if d := b.lingerFor(len(b.pending)); d > 0 {
			b.lingerUpTo(d)
		}
	}
	// Another leader may have taken this call meanwhile (while this one
	// lingered); otherwise the cap may leave it for a later batch.
	for !c.taken {
		batch := b.take(c)
		b.mu.Unlock()
		b.flush(batch)
		b.mu.Lock()
	}
	b.release()
	b.mu.Unlock()
	<-c.wake // closed already unless another leader's flush carries c
	return c.res, c.err
}

// take removes from the queue, for leader's flush, up to the cap of the
// queued calls that no other caller leads (b.mu held).
func (b *Batcher) take(leader *call) []*call {
	batch := make([]*call, 0, min(len(b.pending), b.max))
	rest := b.pending[:0:0]
	for _, x := range b.pending {
		if len(batch) < b.max && (!x.led || x == leader) {
			x.taken = true
			batch = append(batch, x)
		} else {
			rest = append(rest, x)
		}
	}
	b.pending = rest
	return batch
}

// release ends a leader's flush (b.mu held): it hands it to the oldest
// queued call that no one leads, or gives its place up.
func (b *Batcher) release() {
	for _, next := range b.pending {
		if !next.led {
			next.led = true
			close(next.wake)
			return
		}
	}
	b.flushing--
}

// arrived folds a call's arrival at now into the average gap (b.mu held).
// A gap is counted at most as 2×linger, so one long pause does not keep a
// busy Batcher from lingering for long.
func (b *Batcher) arrived(now time.Time) {
	if b.linger == 0 {
		return
	}
	if b.last.IsZero() {
		b.last, b.gap = now, 2*b.linger
		return
	}
	g := min(now.Sub(b.last), 2*b.linger)
	b.last = now
	b.gap += (g - b.gap) / 8
}

// lingerUpTo waits (b.mu held, released meanwhile) until d has passed or
// LingerCalls are queued, and learns whether the wait gathered anyone.
func (b *Batcher) lingerUpTo(d time.Duration) {
	queued := len(b.pending)
	b.lingering = true
	b.mu.Unlock()
	t := time.NewTimer(d)
	select {
	case <-b.full:
	case <-t.C:
	}
	t.Stop()
	b.mu.Lock()
	b.lingering = false
	select {
	case <-b.full: // a signal sent after the timer fired
	default:
	}
	b.learn(len(b.pending) > queued)
}

// learn adjusts lingering to whether the last wait gathered company.
func (b *Batcher) learn(company bool) {
	if company {
		b.backoff = 1
		return
	}
	b.skip = b.backoff
	b.backoff = min(2*b.backoff, maxLingerSkip)
}

// lingerFor is how long a leader with queued calls waits for more before
// it flushes (b.mu held): the expected arrival of the lingerCalls-th call
// at the average gap, at most linger; 0 when calls come further apart
// than linger, or enough are queued already.
func (b *Batcher) lingerFor(queued int) time.Duration {
	want := b.lingerCalls - queued
	if b.linger == 0 || want <= 0 || b.gap >= b.linger {
		return 0
	}
	if b.skip > 0 {
		b.skip--
		return 0
	}
	return min(time.Duration(want)*b.gap, b.linger)
}

// flush sends batch in one pipelined round trip (see Pipelined), with a
// WAIT per master when the Batcher asks for replication; the calls of a
// Merger go merged (RunMerged).
func (b *Batcher) flush(batch []*call) {
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
	defer cancel()
	var units [][]*call // per merged call, its calls
	calls := make([]Call, 0, len(batch))
	for _, c := range batch {
		switch {
		case c.group != nil:
			calls = append(calls, c.group...)
		case c.merge != nil:
			units = mergeUnit(units, c)
		default:
			calls = append(calls, Call{Script: c.script, Keys: c.keys, Args: c.args})
		}
	}
	for _, u := range units {
		calls = append(calls, u[0].merge.Merge(mergeCalls(u)))
	}
	res := PipelinedReplicated(ctx, b.rdb, calls, b.rep)
	for _, c := range batch {
		switch {
		case c.group != nil:
			c.results, res = res[:len(c.group):len(c.group)], res[len(c.group):]
		case c.merge != nil:
		default:
			c.res, c.err = res[0].Val, res[0].Err
			res = res[1:]
		}
	}
	for i, u := range units {
		for k, r := range u[0].merge.Split(res[i], len(u)) {
			u[k].res, u[k].err = r.Val, r.Err
		}
	}
	for _, c := range batch {
		c.finished = true
		if !c.led { // a leader's wake was closed when it was handed the lead
			close(c.wake)
		}
	}
}

// mergeUnit adds c to the last merged call of its kind that has room, or
// starts one.
func mergeUnit(units [][]*call, c *call) [][]*call {
	for i := len(units) - 1; i >= 0; i-- {
		if units[i][0].merge == c.merge && len(units[i]) < max(c.merge.MaxMerge(), 1) {
			units[i] = append(units[i], c)
			return units
		}
	}
	return append(units, []*call{c})
}

// mergeCalls are the script calls of a merged unit.
func mergeCalls(u []*call) []Call {
	calls := make([]Call, len(u))
	for i, c := range u {
		calls[i] = Call{Script: c.script, Keys: c.keys, Args: c.args}
	}
	return calls
}
