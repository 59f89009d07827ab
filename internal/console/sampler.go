package console

import (
	"context"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/charts"
	"github.com/agentq/agentq/internal/inspect"
	"github.com/agentq/agentq/internal/startstop"
)

// Defaults of SamplerOptions.
const (
	// DefaultSampleEvery is how often the sampler reads the queues.
	DefaultSampleEvery = 15 * time.Second
	// DefaultSampleWindow is how far back the Overview chart reaches.
	DefaultSampleWindow = time.Hour
)

// Sample is one minute of the Overview's charts, as kept in Redis
// (internal/charts): the queue sizes read in it, summed over the queues,
// and the attempts that ended in it.
type Sample struct {
	// At is the minute's start.
	At        time.Time `json:"at"`
	Pending   int       `json:"pending"`
	Active    int       `json:"active"`
	Scheduled int       `json:"scheduled"`
	Retry     int       `json:"retry"`
	// Succeeded and Failed are the attempts the workers counted as
	// succeeded and failed in the minute.
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`

	queues bool // the queue sizes were read in this minute
}

// SamplerOptions configure a Sampler. The zero value is usable.
type SamplerOptions struct {
	// Every is the sampling interval. Zero: DefaultSampleEvery.
	Every time.Duration
	// Window is how far back the Overview's charts reach. Zero:
	// DefaultSampleWindow.
	Window time.Duration
	// Keep is how long the per-minute series are kept in Redis. Zero:
	// charts.DefaultKeep (24 hours).
	Keep time.Duration
	// Now is the clock samples are stamped with. Zero: time.Now.
	Now func() time.Time
	// Logger logs failed readings (at debug level: Redis being away is
	// reported elsewhere). Zero: slog.Default().
	Logger *slog.Logger
}

// Sampler feeds the Overview's charts, which are kept in Redis per minute
// (internal/charts), so that every `enqueuer serve` shows the same charts
// and a restart loses none: every SamplerOptions.Every it reads asynq's
// queue sizes (summed over queues) and stores them as the minute's
// reading (one small script call, which also trims minutes older than
// Keep); the attempts that succeeded and failed per minute are counted
// by the workers. Samples reads the last Window back from Redis.
// Start/Stop follow internal/startstop: the loop ends when Start's ctx
// ends or Stop is called.
type Sampler struct {
	startstop.Loop
	rdb  redis.UniversalClient
	opts SamplerOptions
}

// NewSampler returns a sampler of rdb's asynq queues; Start begins it.
func NewSampler(rdb redis.UniversalClient, opts SamplerOptions) *Sampler {
	if opts.Every <= 0 {
		opts.Every = DefaultSampleEvery
	}
	if opts.Window <= 0 {
		opts.Window = DefaultSampleWindow
	}
	if opts.Keep <= 0 {
		opts.Keep = charts.DefaultKeep
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Sampler{rdb: rdb, opts: opts}
}

// Start takes a first sample at once, then one every interval, until ctx
// ends or Stop is called.
func (s *Sampler) Start(ctx context.Context) {
	s.Go(ctx, func(ctx context.Context) {
		t := time.NewTicker(s.opts.Every)
		defer t.Stop()
		for {
			s.SampleNow(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
}

// Stop ends the sampling and waits for it.
func (s *Sampler) Stop() { s.Loop.Stop() }

// Every is the sampling interval.
func (s *Sampler) Every() time.Duration { return s.opts.Every }

// Keep is how long the per-minute series are kept in Redis.
func (s *Sampler) Keep() time.Duration { return s.opts.Keep }

// Window is how far back the charts reach.
func (s *Sampler) Window() time.Duration { return s.opts.Window }

// SampleNow reads the queues once and stores the reading in Redis as the
// current minute's (nothing on error).
func (s *Sampler) SampleNow(ctx context.Context) {
	qs, err := inspect.Queues(s.rdb)
	if err != nil {
		if ctx.Err() == nil {
			s.opts.Logger.Debug("console sampler: reading the queues failed", "err", err)
		}
		return
	}
	var q charts.Queues
	for _, x := range qs {
		q.Pending += x.Pending
		q.Active += x.Active
		q.Scheduled += x.Scheduled
		q.Retry += x.Retry
	}
	if err := charts.RecordQueues(ctx, s.rdb, s.opts.Now(), q, s.opts.Keep); err != nil && ctx.Err() == nil {
		s.opts.Logger.Debug("console sampler: storing the reading failed", "err", err)
	}
}

// Samples reads the minutes of the last Window before now from Redis,
// oldest first (only those that hold something).
func (s *Sampler) Samples(ctx context.Context) ([]Sample, error) {
	now := s.opts.Now()
	minutes, err := charts.Read(ctx, s.rdb, now.Add(-s.opts.Window).Add(time.Minute), now)
	if err != nil {
		return nil, err
	}
	out := make([]Sample, 0, len(minutes))
	for _, m := range minutes {
		smp := Sample{At: m.At, Succeeded: m.Succeeded, Failed: m.Failed}
		if q := m.Queues; q != nil {
			smp.Pending, smp.Active, smp.Scheduled, smp.Retry, smp.queues = q.Pending, q.Active, q.Scheduled, q.Retry, true
		}
		out = append(out, smp)
	}
	return out, nil
}
