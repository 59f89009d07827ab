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
// There is no background goroutine and no timer. The first caller to find
// no flush in progress leads: it sends every call queued so far in one
// pipeline. Calls arriving meanwhile queue up; when the leader's round trip
// returns it hands the lead to the oldest queued caller, which sends the
// whole queue, and so on. A lone caller therefore pays one plain round trip
// (no added latency), and N concurrent callers pay about one round trip
// between them, which is what lets the worker's per-task bookkeeping keep up
// with asynq itself.

// DefaultBatchTimeout bounds one flush when NewBatcher is given none.
const DefaultBatchTimeout = 3 * time.Second

// DefaultMaxBatch caps the calls sent in one pipeline when NewBatcher is
// given none.
const DefaultMaxBatch = 512

// Batcher is a Runner that sends script calls in shared pipelines. The
// zero value is not usable; create one with NewBatcher. It is safe for
// concurrent use.
type Batcher struct {
	rdb     redis.UniversalClient
	timeout time.Duration
	max     int
	rep     Replication

	mu       sync.Mutex
	pending  []*call
	flushing bool
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
	return &Batcher{rdb: rdb, timeout: o.Timeout, max: o.MaxBatch, rep: o.Replication}
}

type call struct {
	script *redis.Script
	keys   []string
	args   []any
	res    any
	err    error
	done   chan struct{} // closed when res/err are set
	lead   chan struct{} // closed when this call is handed the lead
}

// Run runs script with keys and args like (*redis.Script).Run and returns its
// reply, sharing the round trip with concurrent calls. An error of ctx before
// the call is queued returns at once; once queued, Run waits for the reply
// (bounded by the Batcher's timeout).
func (b *Batcher) Run(ctx context.Context, script *redis.Script, keys []string, args ...any) (any, error) {
	return b.do(ctx, &call{script: script, keys: keys, args: args})
}

func (b *Batcher) do(ctx context.Context, c *call) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.done, c.lead = make(chan struct{}), make(chan struct{})
	b.mu.Lock()
	b.pending = append(b.pending, c)
	if b.flushing {
		b.mu.Unlock()
		select {
		case <-c.done:
			return c.res, c.err
		case <-c.lead:
			// The previous leader handed over: flush below.
		}
		b.mu.Lock()
	}
	b.flushing = true
	for {
		n := len(b.pending)
		if n > b.max {
			n = b.max
		}
		batch := make([]*call, n)
		copy(batch, b.pending)
		b.pending = append(b.pending[:0:0], b.pending[n:]...)
		b.mu.Unlock()
		b.flush(batch)
		b.mu.Lock()
		if isDone(c) {
			break
		}
		// The cap left this call queued: lead the next batch too.
	}
	if len(b.pending) > 0 {
		close(b.pending[0].lead) // hand over; flushing stays true
	} else {
		b.flushing = false
	}
	b.mu.Unlock()
	return c.res, c.err
}

func isDone(c *call) bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// flush sends batch in one pipelined round trip (see Pipelined), with a
// WAIT per master when the Batcher asks for replication.
func (b *Batcher) flush(batch []*call) {
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
	defer cancel()
	calls := make([]Call, len(batch))
	for i, c := range batch {
		calls[i] = Call{Script: c.script, Keys: c.keys, Args: c.args}
	}
	for i, r := range PipelinedReplicated(ctx, b.rdb, calls, b.rep) {
		batch[i].res, batch[i].err = r.Val, r.Err
		close(batch[i].done)
	}
}
