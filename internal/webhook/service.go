package webhook

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentq/agentq/internal/fleet"
	"github.com/agentq/agentq/internal/rkeys"
)

// Start runs the deliverer (Run) until ctx ends or Stop, and, on a Redis
// Cluster, the outbox repair (Repair) every RepairEvery, by one worker of
// the fleet per interval (a fleet claim on rkeys.WebhooksRepairClaim). A
// second Start, or one after Stop, does nothing.
func (d *Deliverer) Start(ctx context.Context) {
	d.lifecycle.Go(ctx, func(ctx context.Context) {
		if d.cluster {
			repair := fleet.One(d.rdb, d.o.RepairEvery, fleet.Job{Key: rkeys.WebhooksRepairClaim(), Run: d.repair},
				fleet.Options{TTL: d.o.RepairEvery})
			repair.Start(ctx)
			defer repair.Stop()
		}
		_ = d.Run(ctx)
	})
}

// Stop ends the deliveries and waits for those under way; idempotent.
func (d *Deliverer) Stop() { d.lifecycle.Stop() }

// repair is one pass of the outbox repair, logged.
func (d *Deliverer) repair(ctx context.Context) {
	if n, err := d.Repair(ctx); err != nil && ctx.Err() == nil {
		d.o.Logger.Warn("webhooks: outbox repair failed", "err", err)
	} else if n > 0 {
		d.o.Logger.Info("webhooks: outbox repair made tasks due", "tasks", n)
	}
}

// Instrument is o with Observe and Pending counting in metrics it
// registers in reg: agentq_webhook_deliveries_total (by webhook and
// outcome) and agentq_webhook_pending_tasks.
func Instrument(o Options, reg prometheus.Registerer) Options {
	deliveries := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentq_webhook_deliveries_total",
		Help: "Webhook delivery attempts by webhook and outcome (delivered, failed, given_up)."}, []string{"webhook", "outcome"})
	pending := prometheus.NewGauge(prometheus.GaugeOpts{Name: "agentq_webhook_pending_tasks",
		Help: "Tasks with webhook deliveries still to make (due, waiting for a retry or being made), as this worker last saw."})
	reg.MustRegister(deliveries, pending)
	o.Observe = func(hook, outcome string) { deliveries.WithLabelValues(hook, outcome).Inc() }
	o.Pending = func(n int) { pending.Set(float64(n)) }
	return o
}
