package charts

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/defaults"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/internal/tally"
)

// DefaultFlushEvery is how often a Counter adds its counts to Redis.
const DefaultFlushEvery = 10 * time.Second

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
// takes a mutex and no Redis call. Flushes are internal/tally's numbered
// batches, which the script applies at most once: a flush Redis did not
// answer is sent again, with its number, before any later counts (minutes
// older than Keep are dropped from it), so it counts once; a flush Redis
// refused (ErrFlushRefused) is dropped. Start/Stop follow
// internal/startstop; Stop (idempotent) flushes what is left. A nil
// *Counter counts nothing.
type Counter struct {
	rdb   redis.UniversalClient
	opts  CounterOptions
	tally *tally.Tally[minutes]
}

// minutes are a flush's counts: unix minute -> succeeded, failed.
type minutes map[int64]*[2]int64

// ErrFlushRefused: Redis answered a flush with an error (not a transport
// failure): the batch is dropped, not sent again.
var ErrFlushRefused = errors.New("charts: flush refused")

// NewCounter returns a counter flushing to rdb; Start begins the flushes.
func NewCounter(rdb redis.UniversalClient, opts CounterOptions) *Counter {
	opts.Every = defaults.Positive(opts.Every, DefaultFlushEvery)
	opts.Keep = defaults.Positive(opts.Keep, DefaultKeep)
	opts.Now = defaults.Clock(opts.Now)
	opts.Logger = defaults.Logger(opts.Logger)
	c := &Counter{rdb: rdb, opts: opts}
	c.tally = tally.New("charts: flushing attempt counts", ErrFlushRefused, func() minutes { return minutes{} }, c.send)
	return c
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
	c.tally.Add(func(p minutes) {
		n := p[m]
		if n == nil {
			n = &[2]int64{}
			p[m] = n
		}
		n[i]++
	})
}

// Start flushes every interval until ctx ends or Stop is called, then
// flushes once more.
func (c *Counter) Start(ctx context.Context) {
	c.tally.Start(ctx, c.opts.Every, c.tally.LogFailed(c.opts.Logger, slog.LevelDebug, "charts: flushing the attempt counts failed"))
}

// Stop ends the flushes, flushing what is left, and waits for it.
func (c *Counter) Stop() { c.tally.Stop() }

// Flush adds the counts to Redis now (nothing to do: no call): first a
// flush Redis did not answer, sent again as it was, then what was counted
// since.
func (c *Counter) Flush(ctx context.Context) error { return c.tally.Flush(ctx) }

// send runs chartCountScript on flush seq of counter id (nothing counted:
// no call).
func (c *Counter) send(ctx context.Context, id string, seq int64, counts minutes) error {
	if len(counts) == 0 {
		return nil
	}
	first := oldest(c.opts.Now(), c.opts.Keep)
	ms := make([]int64, 0, len(counts))
	for m := range counts {
		ms = append(ms, m)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i] < ms[j] })
	args := []any{seq, int64(tally.NumberTTL / time.Second), first}
	for _, m := range ms {
		if n := counts[m]; m >= first {
			if n[0] > 0 {
				args = append(args, m, fieldOK, n[0])
			}
			if n[1] > 0 {
				args = append(args, m, fieldFail, n[1])
			}
		}
	}
	keys := []string{rkeys.ChartCounts(), rkeys.ChartMinutes(), rkeys.ChartFlushed(id)}
	return chartCountScript.Run(ctx, c.rdb, keys, args...).Err()
}
