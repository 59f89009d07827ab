package console

import (
	"time"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/defaults"
)

// breakerMode is how a breaker opens, as the Breakers page says it: from
// the circuit_breaker settings of the first agent (by name) that uses its
// key. A key no configured agent uses has none.
type breakerMode struct {
	// Rate: rate mode (a failure rate over a sliding window); else
	// consecutive mode (Threshold failures in a row).
	Rate            bool
	Window          time.Duration
	FailureRate     float64
	MinCalls        int
	MinFailingTasks int
	Threshold       int
}

// breakerModes are the modes of cfg's breaker keys, with the breaker's
// defaults where the settings leave a number out (pointers: the template
// reads a key cfg does not use as nil).
func breakerModes(cfg *config.Config) map[string]*breakerMode {
	out := map[string]*breakerMode{}
	for _, name := range cfg.AgentNames() {
		a, ok := cfg.Agent(name)
		if _, seen := out[a.BreakerKey]; !ok || seen {
			continue
		}
		b := a.CircuitBreaker
		rate := b.FailureRate
		if !(rate > 0 && rate <= 1) {
			rate = config.DefaultFailureRate
		}
		out[a.BreakerKey] = &breakerMode{
			Rate:            b.ResolvedMode() == config.BreakerModeRate,
			Window:          defaults.Positive(b.Window, config.DefaultBreakerWindow),
			FailureRate:     rate,
			MinCalls:        defaults.Positive(b.MinCalls, config.DefaultMinCalls),
			MinFailingTasks: defaults.Positive(b.MinFailingTasks, config.DefaultMinFailingTasks),
			Threshold:       defaults.Positive(b.FailureThreshold, config.DefaultFailureThreshold),
		}
	}
	return out
}
