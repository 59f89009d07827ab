package usage

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

// DefaultFlushEvery is how often a Recorder adds its counts to Redis: the
// most `inspector usage` lags behind the attempts.
const DefaultFlushEvery = 5 * time.Second

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
	// Logger logs failed flushes, at warn level. Zero: slog.Default().
	Logger *slog.Logger
}

// Recorder is a worker's usage.Sink: Add counts an attempt's usage in
// memory (a mutex, no Redis call), and the flush loop adds the counts to
// the fleet's totals in Redis every RecorderOptions.Every: one
// totalsScript call per flush, none when nothing was added. Flushes are
// internal/tally's numbered batches, which the script applies all or
// nothing and at most once: a flush Redis did not answer is sent again,
// with its number, before any later counts; a flush Redis refused
// (ErrFlushRefused) is dropped. Hours past the retention are dropped from
// a batch sent again. In memory too an hour holds at most MaxSeries series
// per flush, the rest folded as in Redis. Start/Stop follow
// internal/startstop; Stop (idempotent) flushes what is left. A nil
// *Recorder records nothing.
type Recorder struct {
	rdb   redis.UniversalClient
	opts  RecorderOptions
	tally *tally.Tally[hours]
}

// hours are a flush's counts: unix hour -> series -> counts.
type hours map[int64]map[Series]*Counts

// ErrFlushRefused: Redis answered a flush with an error (not a transport
// failure): the batch is dropped, not sent again, and nothing of it was
// added (the script checks everything before it writes).
var ErrFlushRefused = errors.New("usage: flush refused")

var _ Sink = (*Recorder)(nil)

// NewRecorder returns a recorder flushing to rdb; Start begins the flushes.
func NewRecorder(rdb redis.UniversalClient, opts RecorderOptions) *Recorder {
	opts.Every = defaults.Positive(opts.Every, DefaultFlushEvery)
	opts.Retention = defaults.Positive(opts.Retention, DefaultRetention)
	opts.MaxSeries = defaults.Positive(opts.MaxSeries, DefaultMaxSeries)
	opts.Now = defaults.Clock(opts.Now)
	opts.Logger = defaults.Logger(opts.Logger)
	r := &Recorder{rdb: rdb, opts: opts}
	r.tally = tally.New("usage: flushing totals", ErrFlushRefused, func() hours { return hours{} }, r.send)
	return r
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
	r.tally.Add(func(p hours) { r.addTo(p, unixHour(at), s, countsOf(e)) })
}

func (r *Recorder) addTo(p hours, h int64, s Series, c Counts) {
	hour := p[h]
	if hour == nil {
		hour = map[Series]*Counts{}
		p[h] = hour
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
	r.tally.Start(ctx, r.opts.Every, r.tally.LogFailed(r.opts.Logger, slog.LevelWarn, "usage: flushing the usage totals failed"))
}

// Stop ends the flushes, flushing what is left, and waits for it. A
// recorder never started flushes nothing.
func (r *Recorder) Stop() {
	if r != nil {
		r.tally.Stop()
	}
}

// Started reports whether Start started the flushes.
func (r *Recorder) Started() bool { return r != nil && r.tally.Started() }

// Flush adds the counts to Redis now (nothing to add: no call): first a
// batch Redis did not answer, sent again as it was, then what was counted
// since. Its error wraps ErrFlushRefused when Redis refused a batch (which
// is then dropped); any other error means a batch is kept for the next
// flush.
func (r *Recorder) Flush(ctx context.Context) error {
	if r == nil {
		return nil
	}
	return r.tally.Flush(ctx)
}

// send runs totalsScript on flush seq of recorder id (its hours from the
// oldest kept on; none: no call).
func (r *Recorder) send(ctx context.Context, id string, seq int64, p hours) error {
	keys, args := r.flushArgs(id, seq, p, r.oldest())
	if len(keys) == 1 {
		return nil
	}
	return totalsScript.Run(ctx, r.rdb, keys, args...).Err()
}

// oldest is the oldest hour still kept: one that ended within the retention.
func (r *Recorder) oldest() int64 {
	return unixHour(r.opts.Now().Add(-r.opts.Retention))
}

// flushArgs are totalsScript's keys and arguments for flush seq of
// recorder id, for the hours of pending from first on (only the
// recorder's mark key when pending has none).
func (r *Recorder) flushArgs(id string, seq int64, pending hours, first int64) ([]string, []any) {
	hours := make([]int64, 0, len(pending))
	for h := range pending {
		if h >= first && len(pending[h]) > 0 {
			hours = append(hours, h)
		}
	}
	sort.Slice(hours, func(i, j int) bool { return hours[i] < hours[j] })
	keys := []string{rkeys.UsageFlushed(id)}
	args := []any{seq, int64(tally.NumberTTL / time.Second), r.opts.MaxSeries, MaxSum}
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
