package config

import (
	"time"

	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/resilience"
	"github.com/agentq/agentq/tasks"
)

// The seed values: what a field is when the file does not set it. Each is
// written once. A value that a lower package also applies on its own (the
// breaker's, Retry-After's, the task store's and the envelope's zero-value
// defaults) is defined there and only named here: config imports resilience
// and tasks, never the other way round.
const (
	// DefaultUsageRetention and DefaultUsageMaxSeries are usage's
	// DefaultRetention and DefaultMaxSeries (written again here: package
	// usage may come to import config; a worker test checks they agree).
	DefaultUsageRetention = 90 * 24 * time.Hour
	DefaultUsageMaxSeries = 10000

	DefaultRedisURL         = "redis://127.0.0.1:6379/0"
	DefaultWaitTimeout      = time.Second
	DefaultConcurrency      = 20
	DefaultShutdownTimeout  = 30 * time.Second
	DefaultQueue            = tasks.DefaultQueue
	DefaultPollInterval     = time.Second
	DefaultForwardInterval  = 50 * time.Millisecond
	DefaultTimeout          = 30 * time.Second
	DefaultMaxAttempts      = 3
	DefaultInitialBackoff   = 500 * time.Millisecond
	DefaultMaxBackoff       = 5 * time.Second
	DefaultJitter           = 0.2
	DefaultMaxRetryAfter    = resilience.DefaultMaxRetryAfter
	DefaultFailureThreshold = breaker.DefaultFailureThreshold
	DefaultBreakerWindow    = breaker.DefaultWindow
	DefaultFailureRate      = breaker.DefaultFailureRate
	DefaultMinCalls         = breaker.DefaultMinCalls
	DefaultMinFailingTasks  = breaker.DefaultMinFailingTasks
	DefaultCooldown         = breaker.DefaultCooldown
	DefaultMaxCooldown      = breaker.DefaultMaxCooldown
	DefaultHalfOpenMaxCalls = breaker.DefaultHalfOpenMaxCalls
	DefaultMaxRestarts      = 3
	DefaultMaxPending       = 10000
	DefaultRetention        = tasks.DefaultRetention
	DefaultAlertThreshold   = 10
	DefaultAlertWindow      = 5 * time.Minute
)

// DefaultRestartDelays returns the seed value of restart.delays: 1m, 2m, 4m.
func DefaultRestartDelays() []time.Duration {
	return []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute}
}

// Defaults of a health probe.
const (
	DefaultProbeInterval = 30 * time.Second
	DefaultProbeTimeout  = 5 * time.Second
)

// DefaultSettings returns the seed agent settings.
func DefaultSettings() Settings {
	return Settings{
		Timeout: DefaultTimeout,
		Retry: Retry{
			MaxAttempts:    DefaultMaxAttempts,
			InitialBackoff: DefaultInitialBackoff,
			MaxBackoff:     DefaultMaxBackoff,
			Jitter:         DefaultJitter,
			MaxRetryAfter:  DefaultMaxRetryAfter,
		},
		CircuitBreaker: Breaker{
			// Mode and FailureThreshold stay empty: rate mode, unless a
			// file sets failure_threshold alone (see Breaker.Mode).
			Window:           DefaultBreakerWindow,
			FailureRate:      DefaultFailureRate,
			MinCalls:         DefaultMinCalls,
			MinFailingTasks:  DefaultMinFailingTasks,
			Cooldown:         DefaultCooldown,
			MaxCooldown:      DefaultMaxCooldown,
			HalfOpenMaxCalls: DefaultHalfOpenMaxCalls,
		},
		Restart: Restart{
			MaxRestarts: DefaultMaxRestarts,
			Delays:      DefaultRestartDelays(),
			MaxPending:  DefaultMaxPending,
		},
	}
}

// Default returns the configuration used when there is no file: every field
// at its seed value and no agents.
func Default() *Config {
	return &Config{
		Redis: Redis{URL: DefaultRedisURL, WaitTimeout: DefaultWaitTimeout},
		Worker: Worker{
			Concurrency:     DefaultConcurrency,
			ShutdownTimeout: DefaultShutdownTimeout,
			Queues:          map[string]int{DefaultQueue: 1},
			PollInterval:    DefaultPollInterval,
			ForwardInterval: DefaultForwardInterval,
		},
		Defaults: Defaults{Settings: DefaultSettings(), Tenant: Tenant{Weight: 1}},
		Agents:   map[string]Agent{},
		History:  History{Retention: DefaultRetention},
		Usage:    UsageTotals{Retention: DefaultUsageRetention, MaxSeries: DefaultUsageMaxSeries},
		Alerts:   Alerts{Threshold: DefaultAlertThreshold, Window: DefaultAlertWindow},
	}
}

// seeder is a block that is absent (nil) unless the file has it, and whose
// fields have seed values when it is present. The decoder calls seed on a
// fresh block before decoding the file's fields over it.
type seeder interface{ seed() }

func (h *HealthProbe) seed() { h.Interval, h.Timeout = DefaultProbeInterval, DefaultProbeTimeout }

func (h *HTTP) seed() { h.Body = BodyRequest }
