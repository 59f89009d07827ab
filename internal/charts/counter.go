package charts

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/internal/startstop"
)

// DefaultFlushEvery is how often a Counter adds its counts to Redis.
const DefaultFlushEvery = 10 * time.Second

// flushTimeout bounds a flush, and the last one at Stop.
const flushTimeout = 3 * time.Second

// CounterOptions configure a Counter. The zero value is usable.
type CounterOptions struct {
	// Every is the flush interval. Zero: DefaultFlushEvery.
	Every time.Duration
	// Keep is how long minutes are kept. Zero: DefaultKeep.
	Keep time.Duration
	// Now is the clock attempts are counted by. Zero: time.Now.
	Now func() time.Time
	// Logger logs failed flushes (at debug level: the counts are kept for
	// the next one). Zero: slog.Default().
	Logger *slog.Logger
}

// Counter counts a worker's attempts per minute in memory and adds them to
// the chart series in Redis (rkeys.ChartCounts) every CounterOptions.Every:
// one chartCountScript call per flush (one HINCRBY per minute and series
// that has counts), none when nothing was counted. Counting an attempt
// takes a mutex and no Redis call. A flush that fails keeps its counts for
// the next one (minutes older than Keep are dropped). Start/Stop follow
// internal/startstop; Stop (idempotent) flushes what is left. A nil
// *Counter counts nothing.
type Counter struct {
	startstop.Loop
	rdb  redis.UniversalClient
	opts CounterOptions

	mu     sync.Mutex
	counts map[int64]*[2]int64 // unix minute -> succeeded, failed
}

// NewCounter returns a counter flushing to rdb; Start begins the flushes.
func NewCounter(rdb redis.UniversalClient, opts CounterOptions) *Counter {
	if opts.Every <= 0 {
		opts.Every = DefaultFlushEvery
	}
	if opts.Keep <= 0 {
		opts.Keep = DefaultKeep
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Counter{rdb: rdb, opts: opts, counts: map[int64]*[2]int64{}}
}

// Succeeded counts an attempt that succeeded, now.
func (c *Counter) Succeeded() { c.add(0) }

// Failed counts an attempt that failed, now.
func (c *Counter) Failed() { c.add(1) }

func (c *Counter) add(i int) {
	if c == nil {
		return
	}
	m := unixMinute(c.opts.Now())
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.counts[m]
	if n == nil {
		n = &[2]int64{}
		c.counts[m] = n
	}
	n[i]++
}

// Start flushes every interval until ctx ends or Stop is called, then
// flushes once more.
func (c *Counter) Start(ctx context.Context) {
	c.GoFlush(ctx, c.opts.Every, flushTimeout, c.Flush, func(err error) {
		c.opts.Logger.Debug("charts: flushing the attempt counts failed; kept for the next flush", "err", err)
	})
}

// Stop ends the flushes, flushing what is left, and waits for it.
func (c *Counter) Stop() { c.Loop.Stop() }

// Flush adds the counts to Redis now (nothing to do: no call).
func (c *Counter) Flush(ctx context.Context) error {
	c.mu.Lock()
	counts := c.counts
	c.counts = map[int64]*[2]int64{}
	c.mu.Unlock()
	if len(counts) == 0 {
		return nil
	}
	now := c.opts.Now()
	first := oldest(now, c.opts.Keep)
	minutes := make([]int64, 0, len(counts))
	for m := range counts {
		minutes = append(minutes, m)
	}
	sort.Slice(minutes, func(i, j int) bool { return minutes[i] < minutes[j] })
	args := []any{first}
	for _, m := range minutes {
		if n := counts[m]; m >= first {
			if n[0] > 0 {
				args = append(args, m, fieldOK, n[0])
			}
			if n[1] > 0 {
				args = append(args, m, fieldFail, n[1])
			}
		}
	}
	err := chartCountScript.Run(ctx, c.rdb, []string{rkeys.ChartCounts(), rkeys.ChartMinutes()}, args...).Err()
	if err != nil {
		c.restore(counts, first)
		return fmt.Errorf("charts: flushing attempt counts: %w", err)
	}
	return nil
}

// restore puts back the counts of a failed flush, but those older than first.
func (c *Counter) restore(counts map[int64]*[2]int64, first int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for m, n := range counts {
		if m < first {
			continue
		}
		if cur := c.counts[m]; cur != nil {
			cur[0] += n[0]
			cur[1] += n[1]
		} else {
			c.counts[m] = n
		}
	}
}
