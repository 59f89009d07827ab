// Package notify tells many goroutines of a process when a task records
// an event, over a bounded number of Redis connections.
//
// A Hub is process-wide. Every goroutine that waits for a task (an HTTP
// wait, an event stream, tasks.Client.Wait) takes a Sub of it: the Hub
// subscribes (SSUBSCRIBE) to the task's shard channel (rkeys.TaskEvents)
// once per task, however many goroutines wait for it (reference counted),
// on a few PubSub connections: Options.Shards of them on a single Redis
// (or a Sentinel's master), one per master node on a Cluster (a channel
// goes to the connection of the node that serves its slot). Only then
// does it mark the task watched (record.Store.Watch, which makes the
// record's scripts announce its events) and hand the Sub to the caller,
// who then reads (record.Store.Events or the task's state): an event
// recorded after that read is announced on a channel already subscribed,
// so none is missed.
//
// An announcement can still be lost: a PubSub connection that drops and
// is made again, a Redis older than 7 (no sharded pub/sub) or one that does
// not announce (miniredis). So the Hub also re-checks, every
// Options.Recheck (1 s), the sequence number of every task it watches, in
// one pipelined read for all of them (HGET seq; not one round trip per
// waiter), and wakes the Subs of a task whose number went past what they
// were told: a missed notification is caught within about a second.
//
// A burst of arrivals (10,000 waiters at once) must not fail for want of a
// pooled connection: each arrival's reads (Watch, the first state or
// events read, Exists) go through one group-committing batcher
// (redisx.Batcher), so that they queue in the process and ride a few
// pipelined round trips, one pooled connection at a time, rather than
// each taking a connection of go-redis's pool, whose wait is bounded
// (PoolTimeout) and which the re-check and the API's other requests share.
//
// Subs are woken, never handed events: a woken Sub reads what is new
// itself (Follow and Wait do), so a wake-up that comes twice or is merged
// with another costs a read and loses nothing.
package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redisx"
	"github.com/agentq/agentq/internal/rkeys"
)

// Defaults of Options.
const (
	// DefaultRecheck is how often the Hub re-reads the sequence number of
	// every watched task.
	DefaultRecheck = time.Second
	// DefaultShards is how many PubSub connections the Hub holds on a
	// single Redis (a Cluster: one per master node).
	DefaultShards = 2
	// recheckBatch is the most reads of one pipeline of the re-check.
	recheckBatch = 1000
	// arrivalBatch is the most arrivals' reads of one shared pipeline.
	arrivalBatch = 1000
	// arrivalTimeout bounds one pipeline of the arrivals' reads: longer
	// than a request's Redis bound, since a busy machine can be slow to
	// read a reply of 1,000 and failing it fails 1,000 arrivals.
	arrivalTimeout = 10 * time.Second
	// confirmWait bounds how long Subscribe waits for Redis to confirm the
	// subscription before it goes on anyway (the re-check covers the rest).
	confirmWait = 2 * time.Second
)

// ErrStopped is returned by Subscribe on a Hub that is not running.
var ErrStopped = errors.New("notify: hub not running")

// Options configure a Hub. The zero value is usable.
type Options struct {
	// Recheck is the period of the re-check. Zero: DefaultRecheck.
	Recheck time.Duration
	// Shards is how many PubSub connections to use on a single Redis.
	// Zero: DefaultShards.
	Shards int
	// Logger logs lost PubSub connections. Zero: slog.Default().
	Logger *slog.Logger
}

// Hub multiplexes the waiters of a process over a few Redis connections.
type Hub struct {
	rdb  redis.UniversalClient
	rec  *record.Store
	opts Options

	mu      sync.Mutex
	running bool
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	entries map[string]*entry // by channel
	shards  map[string]*shard // by key: "0".."N-1", or a Cluster node's address
}

// entry is one watched task.
type entry struct {
	id, ch string
	refs   int
	seq    int64 // the highest sequence number the Subs were told of
	subs   map[*Sub]struct{}
	ready  chan struct{} // closed once the subscription is confirmed (or given up)
	shard  *shard
	once   sync.Once
}

func (e *entry) confirm() { e.once.Do(func() { close(e.ready) }) }

// Sub is one waiter's hold on a task: C is signalled when the task may
// have recorded an event the waiter has not read.
type Sub struct {
	h      *Hub
	e      *entry
	c      chan struct{}
	closed bool
}

// New returns a Hub on rdb; rec is the record store of the same Redis.
func New(rdb redis.UniversalClient, rec *record.Store, opts Options) *Hub {
	if opts.Recheck <= 0 {
		opts.Recheck = DefaultRecheck
	}
	if opts.Shards <= 0 {
		opts.Shards = DefaultShards
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	// The arrivals' reads share pipelines (see arrivals): a Store of the
	// same Redis, retention and clock that sends them through a Batcher.
	batch := redisx.NewBatcher(rdb, redisx.BatchOptions{MaxBatch: arrivalBatch, Timeout: arrivalTimeout})
	rec = record.NewStore(rdb, record.WithRetention(rec.Retention()), record.WithClock(rec.Now), record.WithRunner(batch))
	return &Hub{rdb: rdb, rec: rec, opts: opts, entries: map[string]*entry{}, shards: map[string]*shard{}}
}

// Start runs the Hub until Stop (or ctx's end).
func (h *Hub) Start(ctx context.Context) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.running {
		return
	}
	h.ctx, h.cancel = context.WithCancel(context.WithoutCancel(ctx))
	h.running = true
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		select {
		case <-ctx.Done():
			h.Stop()
		case <-h.ctx.Done():
		}
	}()
	h.wg.Add(1)
	go h.recheckLoop()
}

// Stop closes the Hub's connections and wakes every Sub (whose waits then
// end with ErrStopped); it returns once its goroutines have.
func (h *Hub) Stop() {
	h.mu.Lock()
	if !h.running {
		h.mu.Unlock()
		return
	}
	h.running = false
	h.cancel()
	shards := h.shards
	h.shards = map[string]*shard{}
	for _, e := range h.entries {
		e.confirm()
		for s := range e.subs {
			s.signal()
		}
	}
	h.mu.Unlock()
	for _, s := range shards {
		s.close()
	}
	h.wg.Wait()
}

// Conns is how many PubSub connections the Hub holds now.
func (h *Hub) Conns() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.shards)
}

// Watched is how many tasks the Hub watches now.
func (h *Hub) Watched() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.entries)
}

// Subscribe takes a Sub of task id: when it returns, the task's channel is
// subscribed and the task is watched, so that every event recorded after
// the caller's next read wakes the Sub. The caller must Close it. An
// unknown task is record.ErrNotFound.
func (h *Hub) Subscribe(ctx context.Context, id string) (*Sub, error) {
	ch := rkeys.TaskEvents(id)
	h.mu.Lock()
	if !h.running {
		h.mu.Unlock()
		return nil, ErrStopped
	}
	e, ok := h.entries[ch]
	if !ok {
		e = &entry{id: id, ch: ch, subs: map[*Sub]struct{}{}, ready: make(chan struct{})}
		h.entries[ch] = e
	}
	e.refs++
	sub := &Sub{h: h, e: e, c: make(chan struct{}, 1)}
	e.subs[sub] = struct{}{}
	h.mu.Unlock()
	if !ok {
		if err := h.attach(ctx, e); err != nil {
			h.opts.Logger.Warn("notify: subscribe failed (the re-check stands in)", "task", id, "err", err)
			e.confirm()
		}
	}
	t := time.NewTimer(confirmWait)
	select {
	case <-e.ready:
	case <-t.C:
	case <-ctx.Done():
	}
	t.Stop()
	if err := ctx.Err(); err != nil {
		sub.Close()
		return nil, err
	}
	if err := h.rec.Watch(ctx, id); err != nil {
		sub.Close()
		return nil, err
	}
	return sub, nil
}

// C is signalled when the task may have a new event.
func (s *Sub) C() <-chan struct{} { return s.c }

// Seen tells the Hub the waiter has read up to seq (the re-check then
// wakes it only for later events).
func (s *Sub) Seen(seq int64) {
	s.h.mu.Lock()
	s.e.seq = max(s.e.seq, seq)
	s.h.mu.Unlock()
}

// Close releases the Sub; the last one of a task unsubscribes its channel.
func (s *Sub) Close() {
	h := s.h
	h.mu.Lock()
	if s.closed {
		h.mu.Unlock()
		return
	}
	s.closed = true
	e := s.e
	delete(e.subs, s)
	e.refs--
	last := e.refs == 0 && h.entries[e.ch] == e
	if last {
		delete(h.entries, e.ch)
	}
	sh := e.shard
	h.mu.Unlock()
	if last && sh != nil {
		sh.unsubscribe(e.ch)
	}
}

// signal wakes the Sub (a pending wake-up is kept, never doubled).
func (s *Sub) signal() {
	select {
	case s.c <- struct{}{}:
	default:
	}
}

// wake wakes the Subs of the entry of channel ch when seq is past what
// they were told (seq < 0: always).
func (h *Hub) wake(ch string, seq int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.entries[ch]
	if !ok {
		return
	}
	if seq >= 0 && seq <= e.seq {
		return
	}
	e.seq = max(e.seq, seq)
	for s := range e.subs {
		s.signal()
	}
}

// stopped reports whether the Hub's context has ended.
func (h *Hub) stopped() bool { return h.ctx.Err() != nil }

// recheckLoop re-reads the sequence numbers of the watched tasks every
// Options.Recheck.
func (h *Hub) recheckLoop() {
	defer h.wg.Done()
	t := time.NewTicker(h.opts.Recheck)
	defer t.Stop()
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-t.C:
		}
		if err := h.Recheck(h.ctx); err != nil && !h.stopped() {
			h.opts.Logger.Warn("notify: re-check failed", "err", err)
		}
	}
}

// Recheck reads the sequence number of every watched task (pipelined, in
// batches of 1000) and wakes the Subs of those that have gone past what
// their Subs were told.
func (h *Hub) Recheck(ctx context.Context) error {
	h.mu.Lock()
	ids := make([]string, 0, len(h.entries))
	chs := make([]string, 0, len(h.entries))
	for ch, e := range h.entries {
		ids, chs = append(ids, e.id), append(chs, ch)
	}
	h.mu.Unlock()
	for lo := 0; lo < len(ids); lo += recheckBatch {
		hi := min(lo+recheckBatch, len(ids))
		cmds := make([]*redis.StringCmd, 0, hi-lo)
		_, err := h.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, id := range ids[lo:hi] {
				cmds = append(cmds, p.HGet(ctx, rkeys.Task(id), record.FieldSeq))
			}
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return fmt.Errorf("notify: re-check: %w", err)
		}
		for i, c := range cmds {
			if c.Err() == nil {
				h.wake(chs[lo+i], record.ParseSeq(c.Val()))
			}
		}
	}
	return nil
}
