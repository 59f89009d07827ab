package inspect

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/configx"
	"github.com/agentq/agentq/internal/schedule"
	"github.com/agentq/agentq/tasks"
)

// Schedules is the configured schedules' status at now, sorted by name
// (`inspector schedules`, `GET /api/v1/schedules`, the console's Schedules
// page): next and last fire, the last fired task's ID and state.
func Schedules(ctx context.Context, rdb redis.UniversalClient, cfg *config.Config, now time.Time) ([]schedule.Status, error) {
	defs, err := configx.Schedules(cfg)
	if err != nil {
		return nil, err
	}
	return schedule.Statuses(ctx, rdb, tasks.NewStore(rdb), defs, now)
}
