package worker

import (
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/alert"
)

// alerter is the worker's failure-rate alerter (package internal/alert, a
// service: its webhook sender), counting its alerts in
// agentq_alerts_total.
type alerter struct{ *alert.Alerter }

// newAlerter counts failures fleet-wide in rdb, or per process when rdb is
// nil.
func newAlerter(rdb redis.UniversalClient, threshold int, window time.Duration, webhook string, log *slog.Logger, m *metrics) *alerter {
	return &alerter{alert.New(rdb, alert.Options{Threshold: threshold, Window: window, Webhook: webhook, Logger: log,
		Raised: func(agent string) { m.alerts.WithLabelValues(m.agent(agent)).Inc() }})}
}

// failure counts one failure of agent (the delivery's call).
func (a *alerter) failure(agent string) {
	if a != nil {
		a.Failure(agent)
	}
}
