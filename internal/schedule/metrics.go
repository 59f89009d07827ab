package schedule

import "github.com/prometheus/client_golang/prometheus"

// Instrument is o with Observe counting in agentq_schedule_ticks_total (by
// schedule and outcome), which it registers in reg.
func Instrument(o Options, reg prometheus.Registerer) Options {
	ticks := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentq_schedule_ticks_total",
		Help: "Schedule ticks this worker handled, by schedule and outcome (fired; duplicate: another worker fired it; skipped: overlap skip; error)."},
		[]string{"schedule", "outcome"})
	reg.MustRegister(ticks)
	o.Observe = func(name, outcome string) { ticks.WithLabelValues(name, outcome).Inc() }
	return o
}
