package usage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/redisx"
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
	// Logger logs failed flushes, at warn level. Zero: slog.Default().
	Logger *slog.Logger
}

// Recorder is a worker's usage.Sink: Add counts an attempt's usage in
// memory (a mutex, no Redis call), and the flush loop adds the counts to
// the fleet's totals in Redis every RecorderOptions.Every: one
// totalsScript call per flush, none when nothing was added. Each flush
// is a batch with a number of its own (the recorder's random ID and a
// sequence), which the script applies all or nothing and at most once. A
// flush Redis did not answer (a transport error, a timeout: its reply may
// be lost) is kept as it is and sent again, with its number, before any
// later counts — so it counts once whether or not it had been applied; a
// flush Redis refused (ErrFlushRefused) is dropped, never sent again.
// Hours past the retention are dropped from a batch sent again. In memory
// too an hour holds at most MaxSeries series per flush, the rest folded as
// in Redis. Start/Stop follow internal/startstop; Stop (idempotent)
// flushes what is left. A nil *Recorder records nothing.
type Recorder struct {
	startstop.Loop
	rdb  redis.UniversalClient
	opts RecorderOptions
	id   string // rkeys.UsageFlushed's ID

	mu      sync.Mutex
	pending map[int64]map[Series]*Counts // unix hour -> series -> counts

	flushMu sync.Mutex // one flush at a time, in number order
	seq     int64      // the last batch's number
	unsent  *batch     // a batch Redis did not answer: sent again first
}

// batch is one flush's counts and number.
type batch struct {
	seq   int64
	hours map[int64]map[Series]*Counts
}

// flushedTTL is how long Redis keeps the number of a recorder's last
// flush after it: a batch whose reply was lost is recognised when sent
// again within it.
const flushedTTL = 24 * time.Hour

// ErrFlushRefused: Redis answered a flush with an error (not a transport
// failure): the batch is dropped, not sent again, and nothing of it was
// added (the script checks everything before it writes).
var ErrFlushRefused = errors.New("usage: flush refused")

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
	var id [12]byte
	_, _ = rand.Read(id[:])
	return &Recorder{rdb: rdb, opts: opts, id: hex.EncodeToString(id[:]), pending: map[int64]map[Series]*Counts{}}
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
		r.opts.Logger.Warn("usage: flushing the usage totals failed", "err", err,
			"kept", !errors.Is(err, ErrFlushRefused))
	})
}

// Stop ends the flushes, flushing what is left, and waits for it. A
// recorder never started flushes nothing.
func (r *Recorder) Stop() {
	if r != nil {
		r.Loop.Stop()
	}
}

// Flush adds the counts to Redis now (nothing to add: no call): first a
// batch Redis did not answer, sent again as it was, then what was counted
// since. Its error wraps ErrFlushRefused when Redis refused a batch (which
// is then dropped); any other error means a batch is kept for the next
// flush.
func (r *Recorder) Flush(ctx context.Context) error {
	if r == nil {
		return nil
	}
	r.flushMu.Lock()
	defer r.flushMu.Unlock()
	if r.unsent != nil {
		b := r.unsent
		r.unsent = nil
		if err := r.send(ctx, b); err != nil {
			return err
		}
	}
	r.mu.Lock()
	pending := r.pending
	r.pending = map[int64]map[Series]*Counts{}
	r.mu.Unlock()
	r.seq++
	return r.send(ctx, &batch{seq: r.seq, hours: pending})
}

// send runs totalsScript on b (its hours from the oldest kept on); b is
// kept as r.unsent when Redis did not answer.
func (r *Recorder) send(ctx context.Context, b *batch) error {
	keys, args := r.flushArgs(b, r.oldest())
	if len(keys) == 1 {
		return nil
	}
	err := totalsScript.Run(ctx, r.rdb, keys, args...).Err()
	switch {
	case err == nil:
		return nil
	case redisx.Unanswered(err):
		r.unsent = b
		return fmt.Errorf("usage: flushing totals (flush %d kept, sent again next): %w", b.seq, err)
	}
	return fmt.Errorf("%w (flush %d dropped): %w", ErrFlushRefused, b.seq, err)
}

// oldest is the oldest hour still kept: one that ended within the retention.
func (r *Recorder) oldest() int64 {
	return unixHour(r.opts.Now().Add(-r.opts.Retention))
}

// flushArgs are totalsScript's keys and arguments for the hours of b
// from first on (only the recorder's mark key when b has none).
func (r *Recorder) flushArgs(b *batch, first int64) ([]string, []any) {
	pending := b.hours
	hours := make([]int64, 0, len(pending))
	for h := range pending {
		if h >= first && len(pending[h]) > 0 {
			hours = append(hours, h)
		}
	}
	sort.Slice(hours, func(i, j int) bool { return hours[i] < hours[j] })
	keys := []string{rkeys.UsageFlushed(r.id)}
	args := []any{b.seq, int64(flushedTTL / time.Second), r.opts.MaxSeries, MaxSum}
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
