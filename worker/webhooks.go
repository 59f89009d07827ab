package worker

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/record"
	wh "github.com/agentq/agentq/internal/webhook"
)

// newDeliverer is the worker's webhook deliverer (package webhook): every
// worker delivers the fleet's webhooks. nil when the config has none. The
// secrets are read from the environment here, at start: a missing or bad
// one is an error naming its field.
func newDeliverer(cfg *config.Config, rdb redis.UniversalClient, log *slog.Logger, m *metrics) (*wh.Deliverer, error) {
	if len(cfg.Webhooks) == 0 {
		return nil, nil
	}
	hooks, err := cfg.Hooks(os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	rec := record.NewStore(rdb, record.WithRetention(cfg.History.Retention))
	deliveries := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentq_webhook_deliveries_total",
		Help: "Webhook delivery attempts by webhook and outcome (delivered, failed, given_up)."}, []string{"webhook", "outcome"})
	pending := prometheus.NewGauge(prometheus.GaugeOpts{Name: "agentq_webhook_pending_tasks",
		Help: "Tasks with webhook deliveries still to make (due, waiting for a retry or being made), as this worker last saw."})
	m.reg.MustRegister(deliveries, pending)
	return wh.New(rdb, rec, wh.Options{Hooks: hooks, Logger: log,
		Observe: func(hook, outcome string) { deliveries.WithLabelValues(hook, outcome).Inc() },
		Pending: func(n int) { pending.Set(float64(n)) },
	}), nil
}

// deliverWebhooks runs the deliverer until ctx ends.
func (w *Worker) deliverWebhooks(ctx context.Context) {
	_ = w.hooks.Run(ctx)
}
