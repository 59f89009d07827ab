package worker

import (
	"fmt"
	"log/slog"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/configx"
	"github.com/agentq/agentq/internal/schedule"
	"github.com/agentq/agentq/tasks"
)

// newScheduler is the worker's scheduler of the config's schedules
// (package schedule, a service): every worker runs it, and each tick is
// enqueued once however many do. nil when the config has none.
func newScheduler(cfg *config.Config, rdb redis.UniversalClient, client *tasks.Client, log *slog.Logger, m *metrics) (*schedule.Scheduler, error) {
	if len(cfg.Schedules) == 0 {
		return nil, nil
	}
	defs, err := configx.Schedules(cfg)
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	return schedule.New(rdb, client, defs, schedule.Instrument(schedule.Options{Logger: log}, m.reg)), nil
}
