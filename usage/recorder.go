package usage

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

// DefaultFlushEvery is how often a Recorder adds its counts to Redis: the
// most `inspector usage` lags behind the attempts.
const DefaultFlushEvery = 5 * time.Second

// flushTimeout bounds a flush, and the last one at Stop.
const flushTimeout = 3 * time.Second

// RecorderOptions configure a Recorder. The zero value is usable.
type RecorderOptions struct {
	// Every is the flush interval. Zero: DefaultFlushEvery.
	Every time.Duration
	// Retention is how long an hour's totals are kept after the hour ends.
	// Zero: DefaultRetention.
	Retention time.Duration
	// MaxSeries bounds the series an hour counts. Zero: DefaultMaxSeries.
	MaxSeries int
	// Now is the clock of entries with no At, and of the retention. Zero:
	// time.Now.
	Now func() time.Time
	// Logger logs failed flushes (at debug level: the counts are kept for
	// the next one). Zero: slog.Default().
	Logger *slog.Logger
}

// Recorder is a worker's usage.Sink: Add counts an attempt's usage in
// memory (a mutex, no Redis call), and the flush loop adds the counts to
// the fleet's totals in Redis every RecorderOptions.Every: one
// totalsScript call per flush, none when nothing was added. A flush that
// fails keeps its counts for the next one (hours past the retention are
// dropped). In memory too an hour holds at most MaxSeries series per
// flush, the rest folded as in Redis. Start/Stop follow internal/startstop;
// Stop (idempotent) flushes what is left. A nil *Recorder records nothing.
type Recorder struct {
	startstop.Loop
	rdb  redis.UniversalClient
	opts RecorderOptions

	mu      sync.Mutex
	pending map[int64]map[Series]*Counts // unix hour -> series -> counts
}

var _ Sink = (*Recorder)(nil)

// NewRecorder returns a recorder flushing to rdb; Start begins the flushes.
func NewRecorder(rdb redis.UniversalClient, opts RecorderOptions) *Recorder {
	if opts.Every <= 0 {
		opts.Every = DefaultFlushEvery
	}
	if opts.Retention <= 0 {
		opts.Retention = DefaultRetention
	}
	if opts.MaxSeries <= 0 {
		opts.MaxSeries = DefaultMaxSeries
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Recorder{rdb: rdb, opts: opts, pending: map[int64]map[Series]*Counts{}}
}

// Add counts e, in the hour of e.At (zero: now). It never blocks on Redis.
func (r *Recorder) Add(e Entry) {
	if r == nil {
		return
	}
	at := e.At
	if at.IsZero() {
		at = r.opts.Now()
	}
	s := Series{Agent: Clean(e.Agent), Tenant: Clean(e.Tenant), Model: Clean(e.Model)}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.addLocked(unixHour(at), s, countsOf(e))
}

func (r *Recorder) addLocked(h int64, s Series, c Counts) {
	hour := r.pending[h]
	if hour == nil {
		hour = map[Series]*Counts{}
		r.pending[h] = hour
	}
	cur := hour[s]
	if cur == nil {
		if len(hour) >= r.opts.MaxSeries+r.opts.MaxSeries/10 {
			s = Series{Agent: Other, Tenant: Other, Model: Other}
		} else if len(hour) >= r.opts.MaxSeries {
			s.Tenant = Other
		}
		if cur = hour[s]; cur == nil {
			cur = &Counts{}
			hour[s] = cur
		}
	}
	cur.Plus(c)
}

// Start flushes every interval until ctx ends or Stop is called, then
// flushes once more.
func (r *Recorder) Start(ctx context.Context) {
	if r == nil {
		return
	}
	r.GoFlush(ctx, r.opts.Every, flushTimeout, r.Flush, func(err error) {
		r.opts.Logger.Debug("usage: flushing the usage totals failed; kept for the next flush", "err", err)
	})
}

// Stop ends the flushes, flushing what is left, and waits for it. A
// recorder never started flushes nothing.
func (r *Recorder) Stop() {
	if r != nil {
		r.Loop.Stop()
	}
}

// Flush adds the counts to Redis now (nothing to add: no call).
func (r *Recorder) Flush(ctx context.Context) error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	pending := r.pending
	r.pending = map[int64]map[Series]*Counts{}
	r.mu.Unlock()
	first := r.oldest()
	keys, args := r.flushArgs(pending, first)
	if len(keys) == 0 {
		return nil
	}
	if err := totalsScript.Run(ctx, r.rdb, keys, args...).Err(); err != nil {
		r.restore(pending, first)
		return fmt.Errorf("usage: flushing totals: %w", err)
	}
	return nil
}

// oldest is the oldest hour still kept: one that ended within the retention.
func (r *Recorder) oldest() int64 {
	return unixHour(r.opts.Now().Add(-r.opts.Retention))
}

// flushArgs are totalsScript's keys and arguments for the hours of
// pending from first on.
func (r *Recorder) flushArgs(pending map[int64]map[Series]*Counts, first int64) ([]string, []any) {
	hours := make([]int64, 0, len(pending))
	for h := range pending {
		if h >= first && len(pending[h]) > 0 {
			hours = append(hours, h)
		}
	}
	sort.Slice(hours, func(i, j int) bool { return hours[i] < hours[j] })
	var keys []string
	args := []any{r.opts.MaxSeries}
	for _, h := range hours {
		keys = append(keys, rkeys.UsageHour(h), rkeys.UsageSeries(h))
		expireAt := (h+1)*3600 + int64(r.opts.Retention/time.Second)
		args = append(args, expireAt, len(pending[h]))
		for _, s := range ordered(pending[h]) {
			args = append(args, s.Agent, s.Tenant, s.Model)
			for _, v := range pending[h][s].values() {
				args = append(args, v)
			}
		}
	}
	return keys, args
}

// ordered are the series of hour in order, those folded in memory (tenant
// Other) last, so that they take none of the bound's room before the
// series they stand for.
func ordered(hour map[Series]*Counts) []Series {
	out := make([]Series, 0, len(hour))
	for s := range hour {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if (a.Tenant == Other) != (b.Tenant == Other) {
			return b.Tenant == Other
		}
		if a.Agent != b.Agent {
			return a.Agent < b.Agent
		}
		if a.Tenant != b.Tenant {
			return a.Tenant < b.Tenant
		}
		return a.Model < b.Model
	})
	return out
}

// restore puts back the counts of a failed flush, but for hours before first.
func (r *Recorder) restore(pending map[int64]map[Series]*Counts, first int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for h, hour := range pending {
		if h < first {
			continue
		}
		for s, c := range hour {
			r.addLocked(h, s, *c)
		}
	}
}
