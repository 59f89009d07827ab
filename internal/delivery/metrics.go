package delivery

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/configx"
	"github.com/agentq/agentq/internal/usage"
	"github.com/agentq/agentq/tasks"
)

// UnknownAgentLabel is the agent label of every series about a task whose
// agent this worker does not run (dead-lettered not_supported, or a
// payload that cannot be decoded): agent names come from producers, and
// one series per name they choose would grow every worker's /metrics
// without bound.
const UnknownAgentLabel = "_unknown"

// Metrics are the delivery's Prometheus series, registered in the
// worker's registry (each Worker has its own, so several workers can live
// in one process: tests, embedding).
type Metrics struct {
	reg *prometheus.Registry
	// known are the agents the worker runs (see runs); every agent label
	// goes through agent(). nil (tests): any name is its own label.
	known          map[string]bool
	attempts       *prometheus.CounterVec
	duration       *prometheus.HistogramVec
	retries        *prometheus.CounterVec
	deadLetters    *prometheus.CounterVec
	deferrals      *prometheus.CounterVec
	restarts       *prometheus.CounterVec
	restartResults *prometheus.CounterVec
	// suspends counts the runs an agent suspended (by agent and wait
	// kind), resumes the resumed runs' starts (by what ended the wait).
	suspends     *prometheus.CounterVec
	resumes      *prometheus.CounterVec
	breakerState *breaker.StateGauge
	rejections   *prometheus.CounterVec
	fallbacks    *prometheus.CounterVec
	// limitRefusals, limitDeferrals and limitPauses are the provider
	// limits' series, by limits key (and limit).
	limitRefusals  *prometheus.CounterVec
	limitDeferrals *prometheus.CounterVec
	limitPauses    *prometheus.CounterVec
	// tenantTasks counts the runs that ended (succeeded, restarted,
	// dead_lettered) by tenant label (tenant) and outcome.
	tenantTasks *prometheus.CounterVec
	// tenants are the configured tenants: the only tenant names that are
	// their own label (broker.FairConfig.Label).
	tenants broker.FairConfig
	// tokens and cost are the calls' usage (meter.read, attempt.go).
	tokens *prometheus.CounterVec
	cost   *usage.CostCounter
	// classifyWeak counts the failed calls whose verdict was weak, by
	// agent and what decided it (default, model).
	classifyWeak *prometheus.CounterVec
	// byAgent and succeededBy hold the children every delivery touches
	// (by agent label, tenant label), resolved on first use:
	// WithLabelValues hashes its labels and takes the vector's lock on
	// every call.
	byAgent     children[agentSeries]
	succeededBy children[prometheus.Counter]
	// tokensBy holds agentq_tokens_total's input, output and cached
	// children by agent, tenant and model label (a model label is a
	// priced model's name or usage.Other: bounded too).
	tokensBy children[[3]prometheus.Counter]
}

// agentSeries are an agent label's children a call touches.
type agentSeries struct {
	duration  prometheus.Observer
	succeeded prometheus.Counter // attempts{class="", outcome=outcomeSuccess}
}

// outcomeSuccess is the outcome label of a successful call.
const outcomeSuccess = "success"

// children holds metric children by label, made on a label's first use:
// a sync.Map, whose reads of keys that no longer change take no lock. Its
// labels are bounded (agent labels, breaker keys and tenant labels of the
// config). mk may run twice for a label first used by two calls at once;
// WithLabelValues gives both the same child.
type children[T any] struct{ m sync.Map }

// get is key's child, made by mk on its first use.
func (c *children[T]) get(key string, mk func() T) T {
	if v, ok := c.m.Load(key); ok {
		return v.(T)
	}
	v, _ := c.m.LoadOrStore(key, mk())
	return v.(T)
}

// agent is the agent label of name: name when the worker runs that agent,
// UnknownAgentLabel otherwise.
func (m *Metrics) agent(name string) string {
	if m.known != nil && !m.known[name] {
		return UnknownAgentLabel
	}
	return name
}

// tenant is the tenant label of a task of tenant name: its name for a
// tenant the config names (tenants), "default" for the default tenant,
// "other" for every other, so that producers' tenant names cannot grow
// the worker's series without bound.
func (m *Metrics) tenant(name string) string { return m.tenants.Label(name) }

// ended counts a run of env's tenant that ended with outcome (succeeded,
// restarted, dead_lettered).
func (m *Metrics) ended(env *tasks.Envelope, outcome string) {
	tenant := m.tenant(tenantOf(env))
	if outcome != "succeeded" {
		m.tenantTasks.WithLabelValues(tenant, outcome).Inc()
		return
	}
	m.succeededBy.get(tenant, func() prometheus.Counter { return m.tenantTasks.WithLabelValues(tenant, outcome) }).Inc()
}

// tenantOf is the tenant of env ("": the default tenant, also for a nil
// env).
func tenantOf(env *tasks.Envelope) string {
	if env == nil {
		return ""
	}
	return env.Tenant
}

// runs sets the agents the worker runs: from then on, any other name is
// labelled UnknownAgentLabel.
func (m *Metrics) runs(agents []string) {
	m.known = make(map[string]bool, len(agents))
	for _, name := range agents {
		m.known[name] = true
	}
}

// NewMetrics registers the delivery's series in reg; agents are the
// agents the worker runs (every other name is labelled UnknownAgentLabel;
// nil: every name is its own label),
// tenants the configured ones.
func NewMetrics(reg *prometheus.Registry, agents []string, tenants broker.FairConfig) *Metrics {
	m := &Metrics{
		reg: reg, tenants: tenants,
		attempts: counter("agentq_attempts_total",
			"Agent attempts by agent, error class (\"\" on success) and outcome.", "agent", "class", "outcome"),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "agentq_attempt_duration_seconds", Help: "Duration of agent attempts.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
		}, []string{"agent"}),
		retries: counter("agentq_retries_total",
			"Retries scheduled within a run.", "agent", "class"),
		deadLetters: counter("agentq_dead_letters_total",
			"Tasks dead-lettered.", "agent", "class", "reason"),
		deferrals: counter("agentq_deferrals_total",
			"Tasks deferred because their breaker was open or a provider limit did not admit their call.", "agent"),
		restarts: counter("agentq_restarts_total",
			"Restarts scheduled.", "agent", "class"),
		restartResults: counter("agentq_restart_outcomes_total",
			"How restarted runs ended (succeeded, dead_lettered, restarted).", "agent", "outcome"),
		suspends: counter("agentq_suspends_total",
			"Runs the agent suspended (a sleep, a time, a signal), by wait kind.", "agent", "kind"),
		resumes: counter("agentq_resumes_total",
			"Runs that resumed after a suspend, by what ended the wait (timer, signal, timeout).", "by"),
		breakerState: breaker.NewStateGauge(),
		rejections: counter("agentq_breaker_rejections_total",
			"Admissions refused by a breaker.", "key"),
		fallbacks: counter("agentq_fallbacks_total",
			"Calls sent to a fallback agent, by primary agent, fallback agent and why: the error class of the failed call, breaker_open, over_limit or over_budget.", "agent", "fallback", "class"),
	}
	m.tenantTasks = counter("agentq_tenant_tasks_total",
		"Runs that ended on this worker (succeeded, restarted, dead_lettered), by tenant: a tenant named in the config by its name, the default tenant as default, every other as other.", "tenant", "outcome")
	m.limitRefusals = counter("agentq_limit_refusals_total",
		"Admissions refused by a provider limit in this worker, by limits key and limit (requests, tokens, concurrency, paused); a task waiting in its worker may be refused several times.", "key", "limit")
	m.limitDeferrals = counter("agentq_limit_deferrals_total",
		"Tasks deferred because a provider limit did not admit their call, by limits key and limit (requests, tokens, concurrency, paused).", "key", "limit")
	m.limitPauses = counter("agentq_limit_pauses_total",
		"Fleet-wide pauses of a limits key this worker wrote (or extended) because a provider's reply said the key was exhausted.", "key")
	m.classifyWeak = counter("agentq_classify_weak_total",
		"Failed attempts whose verdict was weak (inspector classify --unmatched lists them), by agent and what decided the class: default (nothing did) or model (the learned model, unsure).", "agent", "classified_by")
	m.reg.MustRegister(m.limitRefusals, m.limitDeferrals, m.limitPauses, m.tenantTasks, m.attempts, m.duration, m.retries, m.deadLetters, m.deferrals,
		m.restarts, m.restartResults, m.suspends, m.resumes, m.breakerState, m.rejections, m.fallbacks, m.classifyWeak)
	m.usageSeries()
	if agents != nil {
		m.runs(agents)
	}
	return m
}

// Agent is the agent label of name: name when the worker runs that agent,
// UnknownAgentLabel otherwise.
func (m *Metrics) Agent(name string) string { return m.agent(name) }

// SetBreakerState notes st as the state this worker last saw of breaker
// key (agentq_breaker_state; the worker's probes set it too).
func (m *Metrics) SetBreakerState(key string, st breaker.State) { m.breakerState.Set(key, st) }

// meter turns the calls' usage into cost (the config's pricing), metrics
// (agentq_tokens_total, agentq_cost_usd_total) and the usage sink's
// entries (one usage.Entry per call that reported usage, priced).
type meter struct {
	prices usage.Prices
	m      *Metrics // tokens, cost, and the tenant labels (metrics.tenant)
}

func newMeter(cfg *config.Config, m *Metrics) *meter {
	return &meter{prices: configx.Prices(cfg), m: m}
}

// usageSeries adds the usage counters to m.
func (m *Metrics) usageSeries() {
	m.tokens = counter("agentq_tokens_total",
		"Tokens the agents' calls reported, by agent, tenant (named tenants of the config, default, the rest other), model (priced models, the rest other) and kind (input, output, cached: cached is a part of input).", "agent", "tenant", "model", "kind")
	m.cost = usage.NewCostCounter("agentq_cost_usd_total",
		"Cost in USD of the tokens the agents' calls reported, by the config's pricing; by agent, tenant and model (as agentq_tokens_total).", "agent", "tenant", "model")
	m.reg.MustRegister(m.tokens, m.cost)
}

// counter is a counter series named name, with help, by labels.
func counter(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}
