package worker

import (
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/schedule"
	"github.com/agentq/agentq/tasks"
)

// newScheduler is the worker's scheduler of the config's schedules
// (package schedule): every worker runs it, and each tick is enqueued once
// however many do. nil when the config has none.
func newScheduler(cfg *config.Config, rdb redis.UniversalClient, client *tasks.Client, log *slog.Logger, m *metrics) (*schedule.Scheduler, error) {
	if len(cfg.Schedules) == 0 {
		return nil, nil
	}
	defs, err := cfg.ScheduleDefs()
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	ticks := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentq_schedule_ticks_total",
		Help: "Schedule ticks this worker handled, by schedule and outcome (fired; duplicate: another worker fired it; skipped: overlap skip; error)."},
		[]string{"schedule", "outcome"})
	m.reg.MustRegister(ticks)
	return schedule.New(rdb, client, defs, schedule.Options{Logger: log,
		Observe: func(name, outcome string) { ticks.WithLabelValues(name, outcome).Inc() }}), nil
}
