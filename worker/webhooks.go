package worker

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/configx"
	"github.com/agentq/agentq/internal/record"
	wh "github.com/agentq/agentq/internal/webhook"
)

// newDeliverer is the worker's webhook deliverer (package webhook, a
// service): every worker delivers the fleet's webhooks. nil when the
// config has none. The secrets are read from the environment here, at
// start: a missing or bad one is an error naming its field.
func newDeliverer(cfg *config.Config, rdb redis.UniversalClient, log *slog.Logger, m *metrics) (*wh.Deliverer, error) {
	if len(cfg.Webhooks) == 0 {
		return nil, nil
	}
	hooks, err := configx.Hooks(cfg, os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	rec := record.NewStore(rdb, record.WithRetention(cfg.History.Retention))
	return wh.New(rdb, rec, wh.Instrument(wh.Options{Hooks: hooks, Logger: log}, m.reg)), nil
}
