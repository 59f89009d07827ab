// Package rbatch group-commits Redis script calls: concurrent callers'
// EVALSHAs ride in one pipelined round trip, and each caller still gets its
// own reply only once its write is applied in Redis.
//
// There is no background goroutine and no timer. The first caller to find
// no flush in progress leads: it sends every call queued so far in one
// pipeline. Calls arriving meanwhile queue up; when the leader's round trip
// returns it hands the lead to the oldest queued caller, which sends the
// whole queue, and so on. A lone caller therefore pays one plain round trip
// (no added latency), and N concurrent callers pay about one round trip
// between them, which is what lets the worker's per-task bookkeeping keep up
// with asynq itself.
package rbatch

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultTimeout bounds one flush when New is given none.
const DefaultTimeout = 3 * time.Second

// DefaultMaxBatch caps the calls sent in one pipeline when New is given none.
const DefaultMaxBatch = 512

// Batcher sends script calls in shared pipelines. The zero value is not
// usable; create one with New. It is safe for concurrent use.
type Batcher struct {
	rdb     redis.UniversalClient
	timeout time.Duration
	max     int

	mu       sync.Mutex
	pending  []*call
	flushing bool
}

// Options configure a Batcher. Zero values mean the defaults.
type Options struct {
	// Timeout bounds each flush (one pipelined round trip plus, after a
	// Redis restart, the reloading of scripts); zero means DefaultTimeout.
	// Callers' own contexts do not cut a flush short: a call that is in a
	// pipeline already may be applied, so its caller waits for the answer.
	Timeout time.Duration
	// MaxBatch caps the calls in one pipeline; zero means DefaultMaxBatch.
	MaxBatch int
}

// New returns a Batcher on rdb.
func New(rdb redis.UniversalClient, o Options) *Batcher {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	return &Batcher{rdb: rdb, timeout: o.Timeout, max: o.MaxBatch}
}

type call struct {
	script *redis.Script
	keys   []string
	args   []any
	build  func(pipe redis.Pipeliner) // Exec's commands (script == nil)
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

// Exec queues the commands build adds to a pipeline and returns the first
// error among them, sharing the round trip with concurrent calls. The whole
// flush is one MULTI/EXEC transaction (per hash slot on a cluster), so one
// Exec's commands are applied together or not at all; build must only add
// commands (it runs on the leader's goroutine).
func (b *Batcher) Exec(ctx context.Context, build func(pipe redis.Pipeliner)) error {
	_, err := b.do(ctx, &call{build: build})
	return err
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

// flush sends batch as one MULTI/EXEC pipeline: EVALSHAs and Exec's
// commands. Script calls answered NOSCRIPT (a restarted or flushed Redis)
// are run again one by one with Script.Run, which loads the script: NOSCRIPT
// means the call did not run.
func (b *Batcher) flush(batch []*call) {
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
	defer cancel()
	if len(batch) == 1 && batch[0].script != nil {
		c := batch[0]
		c.res, c.err = c.script.Run(ctx, b.rdb, c.keys, c.args...).Result()
		close(c.done)
		return
	}
	pipe := b.rdb.TxPipeline()
	ends := make([]int, len(batch)) // batch[i]'s commands are cmds[ends[i-1]:ends[i]]
	for i, c := range batch {
		if c.script != nil {
			c.script.EvalSha(ctx, pipe, c.keys, c.args...)
		} else {
			c.build(pipe)
		}
		ends[i] = pipe.Len()
	}
	cmds, _ := pipe.Exec(ctx) // errors are per command too
	start := 0
	for i, c := range batch {
		for _, cmd := range cmds[start:ends[i]] {
			if e := cmd.Err(); e != nil && !errors.Is(e, redis.Nil) {
				c.err = e
				break
			}
		}
		if c.script != nil {
			c.res, c.err = cmds[start].(*redis.Cmd).Result()
			if c.err != nil && redis.HasErrorPrefix(c.err, "NOSCRIPT") {
				c.res, c.err = c.script.Run(ctx, b.rdb, c.keys, c.args...).Result()
			}
		}
		start = ends[i]
		close(c.done)
	}
}
