package inspect

import (
	"context"
	"fmt"
	"sort"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/configx"
)

// Tenant is one tenant on one queue, as `inspector tenants --json`, GET
// /api/v1/tenants and the console's Tenants page show it: its runs waiting
// (by priority) and in flight, its cap and weight from the config, whether
// it waits at its cap, and when its oldest waiting run became pending.
// The default tenant's name is "".
type Tenant = broker.Tenant

// Tenants reads the tenants of queue (every queue of asynq's queue set
// when queue is ""; none for a queue asynq does not know), sorted by
// queue then tenant; cfg gives their weights
// and caps (nil: the defaults). Each queue costs three round trips,
// whatever its number of tenants (broker.Tenants).
func Tenants(ctx context.Context, rdb redis.UniversalClient, cfg *config.Config, queue string) ([]Tenant, error) {
	queues := []string{queue}
	if queue != "" {
		// A queue asynq has never seen has no tenants (not a made-up
		// row of the default tenant's).
		known, err := rdb.SIsMember(ctx, broker.AllQueues, queue).Result()
		if err != nil {
			return nil, fmt.Errorf("inspect: queues: %w", err)
		}
		if !known {
			return []Tenant{}, nil
		}
	} else {
		var err error
		if queues, err = rdb.SMembers(ctx, broker.AllQueues).Result(); err != nil {
			return nil, fmt.Errorf("inspect: queues: %w", err)
		}
		sort.Strings(queues)
	}
	var fc broker.FairConfig
	if cfg != nil {
		fc = configx.Fair(cfg)
	}
	out := []Tenant{}
	for _, q := range queues {
		ts, err := broker.Tenants(ctx, rdb, q, fc)
		if err != nil {
			return nil, fmt.Errorf("inspect: %w", err)
		}
		out = append(out, ts...)
	}
	return out, nil
}
