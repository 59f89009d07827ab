package broker

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/redisx"
	"github.com/agentq/agentq/internal/rkeys"
)

// TenantSettings are one tenant's dispatch settings.
type TenantSettings struct {
	// Weight is the tenant's share of dispatches while others have work
	// too (a tenant of weight 3 is served three times as often as one of
	// weight 1). Zero means 1.
	Weight float64
	// Concurrency caps the tenant's runs in flight on a queue, fleet-wide
	// (0: no cap).
	Concurrency int
}

func (s TenantSettings) weight() float64 {
	if s.Weight <= 0 {
		return 1
	}
	return s.Weight
}

// FairConfig is the fleet's tenant configuration: the named tenants and the
// settings every other tenant (the default tenant "" too) takes.
type FairConfig struct {
	Named   map[string]TenantSettings
	Default TenantSettings
}

// Of returns the settings of tenant.
func (c FairConfig) Of(tenant string) TenantSettings {
	if s, ok := c.Named[tenant]; ok {
		return s
	}
	return c.Default
}

// PublishFair writes c's named tenants' settings to queue's settings hash,
// which the dequeue reads (the default settings travel with each dequeue).
// Every worker publishes at start; they should share one configuration.
func PublishFair(ctx context.Context, rdb redis.Cmdable, queue string, c FairConfig) error {
	cmds, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, rkeys.FairConf(queue))
		if len(c.Named) > 0 {
			vals := make([]any, 0, 2*len(c.Named))
			for name, s := range c.Named {
				vals = append(vals, name, strconv.FormatFloat(s.weight(), 'g', -1, 64)+" "+strconv.Itoa(s.Concurrency))
			}
			p.HSet(ctx, rkeys.FairConf(queue), vals...)
		}
		return nil
	})
	if err = redisx.TxErr(cmds, err); err != nil {
		return fmt.Errorf("fair: publish the tenants' settings of queue %s: %w", queue, err)
	}
	return nil
}

// Label is the name metrics give tenant: named tenants by name, the
// default tenant "default", every other "other" (bounded label series).
func (c FairConfig) Label(tenant string) string {
	if tenant == "" {
		return "default"
	}
	if _, ok := c.Named[tenant]; ok {
		return tenant
	}
	return "other"
}
