package worker

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/internal/fleet"
	"github.com/agentq/agentq/internal/inspect"
	"github.com/agentq/agentq/internal/rkeys"
)

// GaugesInterval is how often the fleet's gauges (agentq_queue_tasks,
// agentq_worker_slots, agentq_dead_letters) are computed, by the one
// worker that holds their lease: about one Prometheus scrape and one KEDA
// poll.
const GaugesInterval = 15 * time.Second

// gaugesLeases is the gauges' lease in intervals: longer than one, so
// that the holder renews it at its ticks and keeps it while it lives (a
// holder that changed at every interval would have two workers export
// the gauges for an interval).
const gaugesLeases = 3

// queueTaskStates are the state label's values of agentq_queue_tasks,
// each with its count in a queue's inspect.QueueStats: the numbers
// `inspector stats` shows.
var queueTaskStates = []struct {
	name  string
	count func(q inspect.QueueStats) int
}{
	// asynq's pending list and the runs in the tenants' lanes (fair
	// dispatch): every run waiting for a worker.
	{"pending", func(q inspect.QueueStats) int { return q.Pending }},
	{"active", func(q inspect.QueueStats) int { return q.Active }},
	// Delayed runs (and restarts and suspended runs' next runs).
	{"scheduled", func(q inspect.QueueStats) int { return q.Scheduled }},
	// Runs waiting for a retry (and deferred ones: both wait in asynq's
	// retry set).
	{"retry", func(q inspect.QueueStats) int { return q.Retry }},
}

// fleetGauges are the fleet's gauges as the worker holding their lease
// last computed them (fleetSnapshot), a collector: a worker that does not
// hold the lease exports none of their series, so that sum() over the
// workers' series counts the fleet's work once. A snapshot replaces the
// last whole, so a scrape never sees half of one.
type fleetGauges struct {
	queueTasks, slots, deadLetters *prometheus.Desc

	mu   sync.Mutex
	snap *fleetSnapshot // nil: export none
}

// fleetSnapshot is one computation of the fleet's gauges.
type fleetSnapshot struct {
	queues      []inspect.QueueStats
	busy, total int
	deadLetters int64
}

func newFleetGauges() *fleetGauges {
	return &fleetGauges{
		queueTasks: prometheus.NewDesc("agentq_queue_tasks",
			"The fleet's tasks by queue and state: pending (asynq's pending list and the tenants' fair-dispatch lanes), active, scheduled, retry (retrying and deferred); exported by one worker of the fleet.",
			[]string{"queue", "state"}, nil),
		slots: prometheus.NewDesc("agentq_worker_slots",
			"The live workers' task slots: total (the sum of their worker.concurrency) and busy (tasks in flight at their last heartbeat); exported by one worker of the fleet.",
			[]string{"state"}, nil),
		deadLetters: prometheus.NewDesc("agentq_dead_letters",
			"Dead letters in the dead-letter queue; exported by one worker of the fleet.", nil, nil),
	}
}

// set makes s the gauges' values (nil: export none).
func (g *fleetGauges) set(s *fleetSnapshot) {
	g.mu.Lock()
	g.snap = s
	g.mu.Unlock()
}

// Describe is prometheus.Collector's.
func (g *fleetGauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- g.queueTasks
	ch <- g.slots
	ch <- g.deadLetters
}

// Collect is prometheus.Collector's.
func (g *fleetGauges) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	s := g.snap
	g.mu.Unlock()
	if s == nil {
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, q := range s.queues {
		for _, st := range queueTaskStates {
			gauge(g.queueTasks, float64(st.count(q)), q.Queue, st.name)
		}
	}
	gauge(g.slots, float64(s.busy), "busy")
	gauge(g.slots, float64(s.total), "total")
	gauge(g.deadLetters, float64(s.deadLetters))
}

// readFleet computes the fleet's gauges as of now: the queues as
// `inspector stats` reads them (inspect.Queues), the registry's live
// workers' slots (inspect.Slots) and the dead letters.
func readFleet(ctx context.Context, rdb redis.UniversalClient, now time.Time) (*fleetSnapshot, error) {
	qs, err := inspect.Queues(rdb)
	if err != nil {
		return nil, err
	}
	s := &fleetSnapshot{queues: qs}
	if s.busy, s.total, err = inspect.Slots(ctx, rdb, now); err != nil {
		return nil, err
	}
	if s.deadLetters, err = deadletter.NewStore(rdb).Count(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// gaugesService computes the fleet's gauges every interval on the worker
// that holds their lease (internal/fleet) and exports them there; a worker
// that does not hold it, or no longer, exports none, nor one that
// stopped or failed to read them (stale numbers would pass for the
// fleet's).
type gaugesService struct {
	*fleet.Every
	g *fleetGauges
}

// newGaugesService is the service of g, on rdb, every interval (zero:
// GaugesInterval), holder being this worker's ID.
func newGaugesService(rdb redis.UniversalClient, g *fleetGauges, interval time.Duration, holder string,
	log *slog.Logger) *gaugesService {
	if interval <= 0 {
		interval = GaugesInterval
	}
	job := fleet.Job{Key: rkeys.GaugesClaim(),
		Run: func(ctx context.Context) {
			s, err := readFleet(ctx, rdb, time.Now())
			if err != nil && ctx.Err() == nil {
				log.Warn("fleet gauges not computed; none exported until the next interval",
					"err", err, "interval", interval.String())
			}
			g.set(s)
		},
		Idle: func(context.Context) { g.set(nil) },
	}
	return &gaugesService{Every: fleet.One(rdb, interval, job,
		fleet.Options{Holder: holder, TTL: gaugesLeases * interval}), g: g}
}

// Stop ends the loop (releasing the lease) and the export.
func (s *gaugesService) Stop() {
	s.Every.Stop()
	s.g.set(nil)
}
