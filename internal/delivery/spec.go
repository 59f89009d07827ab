package delivery

import (
	"fmt"
	"time"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/budget"
	"github.com/agentq/agentq/internal/inspect"
	"github.com/agentq/agentq/internal/limit"
	"github.com/agentq/agentq/internal/restart"
	"github.com/agentq/agentq/resilience"
)

// limitSpec is an agent's limits.
type limitSpec struct {
	key string
	cfg limit.Config
	// pauseOnly: the agent configures no limits, but it is an HTTP or an
	// exec agent (inspect.PauseOnly), whose provider's replies may still
	// pause key (its breaker key)
	// fleet-wide: its calls honour the pause, read from Redis at most once
	// per pauseCheckEvery per process (admit.go), and nothing else.
	pauseOnly bool
}

// newLimitSpec is the limits of a, an agent as config.Config.Agent
// resolves it (its limits key defaulted there); an HTTP or exec agent
// without a limits block gets a pause-only spec on its breaker key (nil:
// none).
func newLimitSpec(a config.Agent) *limitSpec {
	l := a.Limits
	if l == nil {
		if inspect.PauseOnly(a) {
			return &limitSpec{key: a.BreakerKey, pauseOnly: true}
		}
		return nil
	}
	return &limitSpec{key: l.Key, cfg: limit.Config{
		Requests: l.Requests, Tokens: l.Tokens, Per: l.Per, Concurrency: l.Concurrency,
		Lease: config.Lease(a.Timeout),
	}}
}

// Spec is everything the delivery needs to run one agent: its runner and
// its resolved settings.
type Spec struct {
	name          string
	runner        agent.Runner
	timeout       time.Duration
	maxAttempts   int
	backoff       resilience.Backoff
	maxRetryAfter time.Duration
	breakerKey    string
	breaker       breaker.Config
	restart       restart.Config
	policy        resilience.Policy
	// fallbackNames are the agents a call falls back to, in order (config
	// fallback); fallback holds their specs, linked by New once every spec
	// is built. Empty: no fallback, and the delivery takes no extra step.
	fallbackNames []string
	fallback      []*Spec
	// probed: the agent has a health probe (the worker runs it), and its
	// tasks are never half-open trials.
	probed bool
	// limits are the agent's provider limits; nil: none (admit.go).
	limits *limitSpec
	// budget is the agent's budget; nil: none (admit.go).
	budget *budget.Budget
	// budgetFallback: over its budget, the agent's tasks go to its
	// fallback agents instead of waiting (config budget.fallback).
	budgetFallback bool
}

// buildSpec takes the settings of agent name as config.Config.Agent
// resolves them (its config block when it has one, the defaults otherwise:
// a Go-function agent needs no block); it applies no default of its own.
func buildSpec(cfg *config.Config, name string, run agent.Runner) (*Spec, error) {
	a, _ := cfg.Agent(name)
	// A Go runner's result, events and errors are made valid UTF-8 as
	// Exec's and HTTP's are (agent.Valid).
	run = agent.Valid(run)
	if run == nil {
		var err error
		switch {
		case a.Exec != nil:
			run, err = agent.NewExec(agent.ExecConfig{
				Command: a.Exec.Command, Env: a.Exec.Env, Dir: a.Exec.Dir, MaxOutput: a.Exec.MaxOutputBytes,
			})
		case a.HTTP != nil:
			run, err = agent.NewHTTP(agent.HTTPConfig{
				URL: a.HTTP.URL, Headers: a.HTTP.Headers, Body: a.HTTP.Body, MaxResponse: a.HTTP.MaxResponseBytes,
			})
		default:
			return nil, fmt.Errorf("agent %q has neither exec nor http in %s and no Go function is registered for it", name, cfgName(cfg))
		}
		if err != nil {
			return nil, fmt.Errorf("agent %q: %w", name, err)
		}
	}
	s := a.Settings
	return &Spec{
		fallbackNames:  a.Fallback,
		probed:         a.Health != nil,
		limits:         newLimitSpec(a),
		budget:         inspect.BudgetOf(budget.Agent, name, a.Budget),
		budgetFallback: a.Budget != nil && a.Budget.Fallback,
		name:           name,
		runner:         run,
		timeout:        s.Timeout,
		maxAttempts:    s.Retry.MaxAttempts,
		backoff:        resilience.Backoff{Initial: s.Retry.InitialBackoff, Max: s.Retry.MaxBackoff, Jitter: s.Retry.Jitter},
		maxRetryAfter:  s.Retry.MaxRetryAfter,
		breakerKey:     a.BreakerKey,
		breaker: breaker.Config{
			Mode:             breaker.Mode(s.CircuitBreaker.Mode),
			FailureThreshold: s.CircuitBreaker.FailureThreshold,
			Window:           s.CircuitBreaker.Window,
			FailureRate:      s.CircuitBreaker.FailureRate,
			MinCalls:         s.CircuitBreaker.MinCalls,
			MinFailingTasks:  s.CircuitBreaker.MinFailingTasks,
			Cooldown:         s.CircuitBreaker.Cooldown,
			MaxCooldown:      s.CircuitBreaker.MaxCooldown,
			HalfOpenMaxCalls: s.CircuitBreaker.HalfOpenMaxCalls,
			TrialLease:       config.Lease(s.Timeout),
		},
		restart: restart.Config{MaxRestarts: s.Restart.MaxRestarts, Delays: s.Restart.Delays, MaxPending: s.Restart.MaxPending},
		policy:  s.Policy(),
	}, nil
}

// BuildSpecs builds the spec of every agent cfg configures and of every
// Go-function agent in funcs (which runs its config block's settings, or
// the defaults), then links their fallbacks.
func BuildSpecs(cfg *config.Config, funcs map[string]agent.Runner) (map[string]*Spec, error) {
	specs := map[string]*Spec{}
	for _, name := range cfg.AgentNames() {
		sp, err := buildSpec(cfg, name, funcs[name])
		if err != nil {
			return nil, err
		}
		specs[name] = sp
	}
	for name, r := range funcs {
		if _, ok := specs[name]; ok {
			continue
		}
		sp, err := buildSpec(cfg, name, r)
		if err != nil {
			return nil, err
		}
		specs[name] = sp
	}
	if err := linkFallbacks(specs); err != nil {
		return nil, err
	}
	return specs, nil
}

// linkFallbacks points every spec at the specs of its fallback agents. A
// name without a spec is an error naming it (a validated config only names
// configured agents, each of which has a spec).
func linkFallbacks(specs map[string]*Spec) error {
	for name, sp := range specs {
		sp.fallback = nil
		for i, f := range sp.fallbackNames {
			fs, ok := specs[f]
			if !ok || f == name {
				return fmt.Errorf("agent %q: fallback[%d] %q is not an agent this worker runs", name, i, f)
			}
			sp.fallback = append(sp.fallback, fs)
		}
	}
	return nil
}

func cfgName(cfg *config.Config) string {
	if cfg.Path == "" {
		return "the config"
	}
	return cfg.Path
}

// Name is the agent's name.
func (s *Spec) Name() string { return s.name }

// BreakerKey is the key of the agent's breaker.
func (s *Spec) BreakerKey() string { return s.breakerKey }

// Breaker is the agent's breaker configuration.
func (s *Spec) Breaker() breaker.Config { return s.breaker }

// Fallback are the specs of the agent's fallback agents, in order.
func (s *Spec) Fallback() []*Spec { return s.fallback }
