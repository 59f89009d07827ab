package console

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/inspect"
	"github.com/agentq/agentq/internal/startstop"
)

// Defaults of SamplerOptions.
const (
	// DefaultSampleEvery is how often the sampler reads the queues.
	DefaultSampleEvery = 15 * time.Second
	// DefaultSampleWindow is how far back the Overview chart reaches.
	DefaultSampleWindow = time.Hour
)

// Sample is one reading of every asynq queue, summed.
type Sample struct {
	At        time.Time `json:"at"`
	Pending   int       `json:"pending"`
	Active    int       `json:"active"`
	Scheduled int       `json:"scheduled"`
	Retry     int       `json:"retry"`
	// Succeeded and Failed are the runs asynq counted as processed without
	// and with an error since the previous sample (0 for the first one).
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`

	processed, failedToday int // asynq's counters of the day, for the next delta
}

// SamplerOptions configure a Sampler. The zero value is usable.
type SamplerOptions struct {
	// Every is the sampling interval. Zero: DefaultSampleEvery.
	Every time.Duration
	// Window is how long samples are kept. Zero: DefaultSampleWindow.
	Window time.Duration
	// Now is the clock samples are stamped with. Zero: time.Now.
	Now func() time.Time
	// Logger logs failed readings (at debug level: Redis being away is
	// reported elsewhere). Zero: slog.Default().
	Logger *slog.Logger
}

// Sampler keeps the last hour of queue sizes and of successes and failures
// for the Overview's chart, in the memory of the serving process (a
// restarted `enqueuer serve` starts a new chart; several share nothing).
// It reads asynq's queue sizes and its processed/failed counters of the
// day (summed over queues) every SamplerOptions.Every. Start/Stop follow
// internal/startstop: the loop ends when Start's ctx ends or Stop is called.
type Sampler struct {
	startstop.Loop
	rdb  redis.UniversalClient
	opts SamplerOptions

	mu      sync.Mutex
	samples []Sample
}

// NewSampler returns a sampler of rdb's asynq queues; Start begins it.
func NewSampler(rdb redis.UniversalClient, opts SamplerOptions) *Sampler {
	if opts.Every <= 0 {
		opts.Every = DefaultSampleEvery
	}
	if opts.Window <= 0 {
		opts.Window = DefaultSampleWindow
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

// Window is how long samples are kept.
func (s *Sampler) Window() time.Duration { return s.opts.Window }

// SampleNow reads the queues once and appends a sample (nothing on error).
func (s *Sampler) SampleNow(ctx context.Context) {
	qs, err := inspect.Queues(s.rdb)
	if err != nil {
		if ctx.Err() == nil {
			s.opts.Logger.Debug("console sampler: reading the queues failed", "err", err)
		}
		return
	}
	smp := Sample{At: s.opts.Now().UTC()}
	for _, q := range qs {
		smp.Pending += q.Pending
		smp.Active += q.Active
		smp.Scheduled += q.Scheduled
		smp.Retry += q.Retry
		smp.processed += q.Processed
		smp.failedToday += q.Failed
	}
	s.add(smp)
}

func (s *Sampler) add(smp Sample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.samples); n > 0 {
		prev := s.samples[n-1]
		dp, df := smp.processed-prev.processed, smp.failedToday-prev.failedToday
		if dp < 0 || df < 0 { // a new day: the counters started again
			dp, df = smp.processed, smp.failedToday
		}
		smp.Failed = df
		smp.Succeeded = max(0, dp-df)
	}
	s.samples = append(s.samples, smp)
	cut := smp.At.Add(-s.opts.Window)
	i := 0
	for i < len(s.samples) && s.samples[i].At.Before(cut) {
		i++
	}
	if i > 0 {
		s.samples = append(s.samples[:0:0], s.samples[i:]...)
	}
}

// Samples returns a copy of the samples kept, oldest first.
func (s *Sampler) Samples() []Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Sample(nil), s.samples...)
}
