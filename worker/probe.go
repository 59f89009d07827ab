package worker

import (
	"log/slog"
	"time"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/breaker/probe"
	"github.com/agentq/agentq/internal/delivery"
)

// probeSpec is an agent's resolved health probe (package
// internal/breaker/probe).
type probeSpec = probe.Spec

func newProbeSpec(h config.HealthProbe, ex *config.Exec) *probeSpec { return probe.NewSpec(h, ex) }

// newProber is the prober of sp's health probe (a service), counting in
// the worker's metrics.
func newProber(sp *delivery.Spec, ps *probeSpec, br *breaker.Breakers, m *metrics, log *slog.Logger) *probe.Prober {
	return probe.New(sp.Name(), sp.BreakerKey(), sp.Breaker(), ps, br, probe.Metrics{
		Probed: func(agent string, ok bool, elapsed time.Duration) {
			result := "ok"
			if !ok {
				result = "fail"
			}
			m.probes.WithLabelValues(m.agent(agent), result).Inc()
			m.probeDuration.WithLabelValues(m.agent(agent)).Observe(elapsed.Seconds())
		},
		State: m.delivery.SetBreakerState,
	}, log)
}
