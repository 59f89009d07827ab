package config

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/resilience"
	"github.com/agentq/agentq/tasks"
)

// EnvRedisURL is the environment variable that overrides redis.url.
const EnvRedisURL = "AGENTQ_REDIS_URL"

// The values of an HTTP agent's body field.
const (
	BodyRequest = "request" // POST the whole ActionRequest (the default)
	BodyParams  = "params"  // POST the task's params alone
)

// The values of a class rule's exhausted field.
const (
	ExhaustedRestart    = "restart"
	ExhaustedDeadLetter = "dead_letter"
)

// Config is a loaded, resolved configuration. Every "zero →" below is the
// value a field takes when the file leaves it out; a value written in the
// file is taken literally and validated (concurrency: 0 is an error, not
// "use the default"). Programs that build a Config in Go should start from
// Default.
//
// These structs are the schema: the yaml tag of a field is its key in the
// file, and the decoder (decode.go) follows the tags, so a new field is its
// struct field here (with its doc, tag and, when it is not zero, its seed
// value in defaults.go) and its check in validate.go. Tests require a
// README row for every field.
type Config struct {
	// Redis is where the queues live.
	Redis Redis `yaml:"redis"`
	// Worker holds the worker process's settings.
	Worker Worker `yaml:"worker"`
	// Defaults are the agent settings every agent starts from, with the seed
	// values applied for everything the file's defaults block leaves out,
	// and the settings of the tenants Tenants does not name.
	Defaults Defaults `yaml:"defaults"`
	// Agents are the configured agents by name, each with its settings
	// merged field by field over Defaults.
	Agents map[string]Agent `yaml:"agents"`
	// History is the task-history retention.
	History History `yaml:"history"`
	// Usage configures the fleet's usage totals (package usage).
	Usage UsageTotals `yaml:"usage"`
	// Alerts configures failure alerts.
	Alerts Alerts `yaml:"alerts"`
	// Classifier holds the operator's classifier rules (classifier.go).
	Classifier Classifier `yaml:"classifier"`
	// Webhooks are the endpoints tasks may notify, by name (webhooks.go).
	// Zero → none.
	Webhooks map[string]Webhook `yaml:"webhooks"`
	// Tenants are the named tenants' dispatch settings (tenants.go); every
	// other tenant takes Defaults.Tenant. Zero → none named.
	Tenants map[string]Tenant `yaml:"tenants"`
	// Schedules are the tasks enqueued on a schedule, by name
	// (schedules.go). Zero → none.
	Schedules map[string]Schedule `yaml:"schedules"`
	// Pricing is the price of each model, in USD per million tokens, that
	// turns the tokens attempts report into cost (a dated
	// name such as gpt-4o-2024-08-06 takes gpt-4o's price). No price is
	// built in; a model without one shows tokens only. Zero → none.
	Pricing map[string]Price `yaml:"pricing"`
	// Path is the file the config was loaded from ("" for Default).
	Path string `yaml:"-"`

	// lines maps dotted field paths to the line that set them.
	lines map[string]int
	// redisFromEnv is true when ApplyEnv replaced Redis.URL.
	redisFromEnv bool
}

// Redis locates the Redis deployment: exactly one of URL, Sentinel and
// Cluster. See redis.go for the URL forms and how a client is opened.
type Redis struct {
	// URL is a redis://, rediss:// (TLS) or unix:// URL, or a
	// redis+sentinel:// or redis+cluster:// URL (see ParseRedisURL). Zero →
	// "redis://127.0.0.1:6379/0" when neither sentinel nor cluster is set.
	// AGENTQ_REDIS_URL (and --redis) replace the file's whole topology.
	URL string `yaml:"url"`
	// Sentinel, when set, finds the master through Redis Sentinel.
	// Zero → not used.
	Sentinel *Sentinel `yaml:"sentinel"`
	// Cluster, when set, talks to a Redis Cluster. Zero → not used.
	Cluster *Cluster `yaml:"cluster"`
	// WaitReplicas, when > 0, makes every acknowledged write that a task
	// depends on (an enqueue, a worker's record of an outcome, a dead
	// letter, a restart) wait until this many replicas have it (WAIT).
	// Zero → 0 (no waiting; a failover may lose the last writes).
	WaitReplicas int `yaml:"wait_replicas"`
	// WaitTimeout bounds that wait; a write not on enough replicas by then
	// fails loudly (enqueuer exit 1, HTTP 503). Zero → 1s.
	WaitTimeout time.Duration `yaml:"wait_timeout"`
}

// Sentinel locates a master through Redis Sentinel.
type Sentinel struct {
	// MasterName is the name the sentinels monitor the master under
	// (YAML master_name). Required.
	MasterName string `yaml:"master_name"`
	// Addrs are the sentinels' host:port addresses. Required, at least one.
	Addrs []string `yaml:"addrs"`
	// Password authenticates to the data nodes; ${VAR} is read from the
	// environment when connecting. Zero → no password.
	Password string `yaml:"password"`
	// SentinelPassword authenticates to the sentinels (YAML
	// sentinel_password); ${VAR} as for Password. Zero → none.
	SentinelPassword string `yaml:"sentinel_password"`
	// DB is the database number. Zero → 0.
	DB int `yaml:"db"`
}

// Cluster locates a Redis Cluster.
type Cluster struct {
	// Addrs are seed nodes' host:port addresses (the client discovers the
	// rest). Required, at least one.
	Addrs []string `yaml:"addrs"`
	// Password authenticates to every node; ${VAR} is read from the
	// environment when connecting. Zero → no password.
	Password string `yaml:"password"`
}

// Worker holds the settings of a worker process.
type Worker struct {
	// Concurrency is the number of tasks run at once. Zero → 20.
	Concurrency int `yaml:"concurrency"`
	// ShutdownTimeout is how long running tasks get to finish on shutdown.
	// Zero → 30s.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// HTTPAddr is the listen address of /healthz, /readyz, /metrics and
	// /api/v1/agents. Zero → "" (ops endpoints off).
	HTTPAddr string `yaml:"http_addr"`
	// Queues maps the queues the worker serves to their priorities.
	// Zero → {"default": 1}. A queues block in the file replaces the map.
	Queues map[string]int `yaml:"queues"`
	// PollInterval is how often the fleet looks at its queues anyway (YAML
	// poll_interval): an idle worker blocks on its queues' wake lists,
	// which every enqueue, forward and restart signals, and one worker of
	// the fleet per queue looks every interval for work whose wake-up was
	// lost (each idle worker also looks every 30 intervals), so this is
	// only how late such a task is found. Zero → 1s.
	PollInterval time.Duration `yaml:"poll_interval"`
	// ForwardInterval is the tick of the scheduled/retry forwarder (YAML
	// forward_interval): how soon after it is due a delayed task moves to
	// its queue. A tick asks Redis only when the worker knows a task may be
	// due (or the fleet's look every poll_interval asks). Zero → 50ms.
	ForwardInterval time.Duration `yaml:"forward_interval"`
}

// Defaults is the defaults block: the agent settings every agent starts
// from, and defaults.tenant.
type Defaults struct {
	Settings `yaml:",inline"`
	// Tenant is the dispatch settings of every tenant Config.Tenants does
	// not name, the default tenant included. Zero → weight 1, no cap.
	Tenant Tenant `yaml:"tenant"`
}

// Settings are the per-agent resilience settings. The defaults block holds
// one; every agent holds one merged over it field by field.
type Settings struct {
	// Timeout bounds one attempt. Zero → 30s.
	Timeout time.Duration `yaml:"timeout"`
	// Retry governs the attempts within one run.
	Retry Retry `yaml:"retry"`
	// CircuitBreaker configures the shared breaker of the agent's breaker key.
	CircuitBreaker Breaker `yaml:"circuit_breaker"`
	// Restart governs the delayed restarts after a run has used its attempts.
	Restart Restart `yaml:"restart"`
	// Classes override cells of the decision table per error class
	// (YAML classes: {rate_limited: {retry: true, breaker: true,
	// exhausted: restart, fallback: true}}). Zero → no overrides. The worker merges them over
	// resilience's default policy; an agent's rules are merged over the
	// defaults' rules class by class and field by field.
	Classes map[resilience.Class]ClassRule `yaml:"classes"`
}

// Retry governs the attempts within one run: up to MaxAttempts attempts,
// waiting min(MaxBackoff, InitialBackoff·2^(n-1)) ±Jitter between them.
type Retry struct {
	// MaxAttempts counts the first call and the retries. Zero → 3.
	MaxAttempts int `yaml:"max_attempts"`
	// InitialBackoff is the wait before the first retry. Zero → 500ms.
	InitialBackoff time.Duration `yaml:"initial_backoff"`
	// MaxBackoff caps the wait. Zero → 5s.
	MaxBackoff time.Duration `yaml:"max_backoff"`
	// Jitter is the relative spread, in [0, 1]. Zero → 0.2 when absent from
	// the file; an explicit 0 disables jitter.
	Jitter float64 `yaml:"jitter"`
	// MaxRetryAfter caps a backend's Retry-After (YAML max_retry_after).
	// Zero → 60s.
	MaxRetryAfter time.Duration `yaml:"max_retry_after"`
}

// Breaker configures a circuit breaker.
type Breaker struct {
	// Mode is "rate" or "consecutive". Empty → consecutive when
	// FailureThreshold is set (a configuration written before rate mode;
	// Deprecations names it), rate otherwise.
	Mode string `yaml:"mode"`
	// FailureThreshold is, in consecutive mode, the number of consecutive
	// counted failures that open the breaker. Zero → 3.
	FailureThreshold int `yaml:"failure_threshold"`
	// Window is rate mode's sliding window of counted calls.
	Window time.Duration `yaml:"window"`
	// FailureRate is rate mode's ratio of failed counted calls within the
	// window that opens the breaker, in (0, 1].
	FailureRate float64 `yaml:"failure_rate"`
	// MinCalls is rate mode's minimum number of counted calls within the
	// window before it may open.
	MinCalls int `yaml:"min_calls"`
	// MinFailingTasks is rate mode's minimum number of distinct tasks whose
	// calls failed within the window before it may open.
	MinFailingTasks int `yaml:"min_failing_tasks"`
	// Cooldown is how long the breaker stays open. Each failed half-open
	// trial doubles the next, up to MaxCooldown; closing resets it.
	Cooldown time.Duration `yaml:"cooldown"`
	// MaxCooldown caps the growing cooldown (never below Cooldown).
	MaxCooldown time.Duration `yaml:"max_cooldown"`
	// HalfOpenMaxCalls is the number of trial calls admitted cluster-wide
	// while half-open. Zero → 1.
	HalfOpenMaxCalls int `yaml:"half_open_max_calls"`
}

// Breaker modes (Breaker.Mode).
const (
	BreakerModeRate        = string(breaker.ModeRate)
	BreakerModeConsecutive = string(breaker.ModeConsecutive)
)

// ResolvedMode is the mode b runs in (see Breaker.Mode).
func (b Breaker) ResolvedMode() string {
	return string(breaker.Config{Mode: breaker.Mode(b.Mode), FailureThreshold: b.FailureThreshold}.Resolved())
}

// Deprecations lists what c says in a form that still works but will not
// forever, one sentence each naming the field, for the worker to log at
// start.
func (c *Config) Deprecations() []string {
	var out []string
	check := func(path string, b Breaker) {
		if b.Mode == "" && b.FailureThreshold > 0 {
			out = append(out, fmt.Sprintf("%s.circuit_breaker.failure_threshold without mode: the breaker keeps "+
				"consecutive mode; set mode: consecutive to keep it, or drop failure_threshold for rate mode "+
				"(the default: a failure rate over a sliding window, from several distinct tasks)", path))
		}
	}
	check("defaults", c.Defaults.CircuitBreaker)
	for _, name := range c.AgentNames() {
		a := c.Agents[name]
		if a.CircuitBreaker != c.Defaults.CircuitBreaker {
			check("agents."+name, a.CircuitBreaker)
		}
	}
	return out
}

// Restart governs delayed restarts.
type Restart struct {
	// MaxRestarts is how many times a run is restarted before it is
	// dead-lettered; 0 dead-letters at once. Zero → 3 when absent.
	MaxRestarts int `yaml:"max_restarts"`
	// Delays are the waits before restart 1, 2, …; restart k waits
	// Delays[min(k, len(Delays))-1] (restart.Config.Delay computes it).
	// Zero → [1m, 2m, 4m]. A restart block's delays replace the list.
	Delays []time.Duration `yaml:"delays"`
	// MaxPending is the size at which the restart queue is full.
	// Zero → 10000.
	MaxPending int `yaml:"max_pending"`
}

// ClassRule overrides one row of the decision table. A nil field keeps the
// value it is merged over.
type ClassRule struct {
	// Retry: whether the class is retried within a run.
	Retry *bool `yaml:"retry"`
	// Breaker: whether the class counts against the breaker.
	Breaker *bool `yaml:"breaker"`
	// Exhausted: "restart" or "dead_letter", what happens when the run's
	// attempts are used up.
	Exhausted *string `yaml:"exhausted"`
	// Fallback: whether a failure of this class sends the call at once to
	// the agent's next fallback agent (YAML fallback). Defaults: true for
	// provider_error, rate_limited and quota_exhausted, false otherwise.
	Fallback *bool `yaml:"fallback"`
}

// Agent is one configured agent with its resolved settings.
//
// An agent with neither Exec nor HTTP is allowed: it carries the settings of
// a Go-function agent registered in code under the same name.
type Agent struct {
	// Name is the agent's name (the key under agents).
	Name string `yaml:"-"`
	// Exec, when set, runs the agent as a subprocess.
	Exec *Exec `yaml:"exec"`
	// HTTP, when set, calls the agent over HTTP.
	HTTP *HTTP `yaml:"http"`
	// BreakerKey names the shared circuit breaker. Zero → the agent's name.
	BreakerKey string `yaml:"breaker_key"`
	// Queue is the queue this agent's tasks go to when a producer names
	// none (enqueuer, enqueuer --file, the HTTP API); it must be one of
	// worker.queues. Zero → "default".
	Queue string `yaml:"queue"`
	// Fallback lists the agents a call goes to, in order, when this agent's
	// breaker does not admit it or an attempt fails with a class whose rule
	// has fallback: true (YAML fallback: [backup_llm, …]). Each name must be
	// a configured agent other than this one, and the fallback relation must
	// have no cycle. The chain is this list only: a fallback agent's own
	// fallbacks are not followed. Zero → no fallback.
	Fallback []string `yaml:"fallback"`
	// Health, when set, is the agent's health probe (YAML health). While it
	// is set, real tasks are never the breaker's half-open trials: the probe
	// is. Zero → no probe.
	Health *HealthProbe `yaml:"health"`
	// Limits, when set, are the agent's provider limits (YAML limits),
	// enforced before each call across every worker; agents with the same
	// limits key share them. Zero → no limits.
	Limits *Limits `yaml:"limits"`
	// Budget, when set, is what the agent's calls may use per window,
	// all tenants and workers together (budget.go). Zero → none.
	Budget *Budget `yaml:"budget"`
	// Notify names webhooks (of the webhooks block) that every task of
	// this agent enqueued by enqueuer or the HTTP API notifies, besides
	// the task's own notify list. Zero → none.
	Notify []string `yaml:"notify"`
	// Settings are merged field by field over Config.Defaults: an agent's
	// retry: {max_attempts: 5} keeps the default backoffs.
	Settings `yaml:",inline"`
}

// Limits are the provider limits of one limits key, enforced in Redis for
// every worker together (see limit.Limiter). A call over a limit is not
// made: its task is deferred until capacity frees. Agents sharing a key must
// configure the same numbers.
type Limits struct {
	// Key names the limits; agents with the same key share them.
	// Zero → the agent's breaker key.
	Key string `yaml:"key"`
	// Requests is the number of calls that may start within any window of
	// length Per. Zero → no request limit.
	Requests int `yaml:"requests"`
	// Tokens is the number of tokens the calls of any window of length Per
	// may use, debited after each call from its reply's usage
	// (usage.total_tokens, or the ActionResponse's usage field). Zero → no
	// token limit.
	Tokens int64 `yaml:"tokens"`
	// Per is the window of Requests and Tokens; required when either is
	// set. Zero → none.
	Per time.Duration `yaml:"per"`
	// Concurrency is the number of calls in flight at once, all workers
	// together. Zero → no concurrency limit.
	Concurrency int `yaml:"concurrency"`
}

// HealthProbe is an agent's health probe: exactly one of URL and Command.
type HealthProbe struct {
	// URL is probed with an HTTP GET; a 2xx answer (or ExpectStatus, when
	// set) is healthy. Zero → no URL probe.
	URL string `yaml:"url"`
	// Command is run with no shell; exit status 0 is healthy. It gets the
	// environment and directory of the agent's exec block when the agent
	// has one (the same NAME / NAME=value allowlist), otherwise an empty
	// environment. Zero → no command probe.
	Command []string `yaml:"command"`
	// Interval is the time between probes while the breaker is closed,
	// cluster-wide. Zero → 30s.
	Interval time.Duration `yaml:"interval"`
	// Timeout bounds one probe. Zero → 5s.
	Timeout time.Duration `yaml:"timeout"`
	// ExpectStatus is the HTTP status a URL probe must get (YAML
	// expect_status). Zero → any 2xx.
	ExpectStatus int `yaml:"expect_status"`
}

// Exec describes a subprocess agent (no shell).
type Exec struct {
	// Command is the program and its arguments; it must not be empty.
	Command []string `yaml:"command"`
	// Env lists the environment of the process: "NAME" passes NAME through
	// from the worker's environment, "NAME=value" sets it. Zero → an empty
	// environment.
	Env []string `yaml:"env"`
	// Dir is the working directory. Zero → the worker's.
	Dir string `yaml:"dir"`
	// MaxOutputBytes caps stdout. Zero → the runner's default cap.
	MaxOutputBytes int64 `yaml:"max_output_bytes"`
}

// HTTP describes an HTTP agent.
type HTTP struct {
	// URL is the absolute http:// or https:// URL that is POSTed to.
	URL string `yaml:"url"`
	// Headers are added to each request. Values may contain ${VAR}, which
	// the config keeps literally; see ExpandHeaders.
	Headers map[string]string `yaml:"headers"`
	// Body is "request" (the ActionRequest) or "params" (params alone).
	// Zero → "request".
	Body string `yaml:"body"`
	// MaxResponseBytes caps the response body. Zero → the runner's default
	// cap.
	MaxResponseBytes int64 `yaml:"max_response_bytes"`
}

// ExpandHeaders returns the headers with every ${VAR} replaced by
// getenv("VAR") (os.Getenv when getenv is nil). Only the braced form is
// expanded; a lone $ is kept. Runners call it at request time so that
// secrets never sit in a Config.
func (h HTTP) ExpandHeaders(getenv func(string) string) map[string]string {
	if getenv == nil {
		getenv = os.Getenv
	}
	out := make(map[string]string, len(h.Headers))
	for k, v := range h.Headers {
		out[k] = expandBraced(v, getenv)
	}
	return out
}

func expandBraced(s string, getenv func(string) string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			break
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			break
		}
		b.WriteString(s[:i])
		b.WriteString(getenv(s[i+2 : i+j]))
		s = s[i+j+1:]
	}
	b.WriteString(s)
	return b.String()
}

// History configures task history.
type History struct {
	// Retention is how long a task's history is kept. Zero → 168h (7 days).
	Retention time.Duration `yaml:"retention"`
}

// UsageTotals configures the fleet's usage totals per agent, tenant, model
// and hour (usage.Recorder).
type UsageTotals struct {
	// Retention is how long an hour's totals are kept after the hour ends.
	// Zero → 2160h (90 days).
	Retention time.Duration `yaml:"retention"`
	// MaxSeries bounds the (agent, tenant, model) series one hour counts.
	// Zero → 10000.
	MaxSeries int `yaml:"max_series"`
}

// Alerts configures failure alerts.
type Alerts struct {
	// Threshold is the number of failures within Window that raises an
	// alert. Zero → 10.
	Threshold int `yaml:"threshold"`
	// Window is the counting window. Zero → 5m.
	Window time.Duration `yaml:"window"`
	// WebhookURL receives alerts as JSON POSTs. Zero → none.
	WebhookURL string `yaml:"webhook_url"`
}

// Clone returns a deep copy of s (the Delays slice and Classes map are not
// shared).
func (s Settings) Clone() Settings {
	s.Restart.Delays = slices.Clone(s.Restart.Delays)
	if s.Classes != nil {
		classes := make(map[resilience.Class]ClassRule, len(s.Classes))
		for k, r := range s.Classes {
			classes[k] = r.clone()
		}
		s.Classes = classes
	}
	return s
}

func (r ClassRule) clone() ClassRule {
	return ClassRule{Retry: clonePtr(r.Retry), Breaker: clonePtr(r.Breaker), Exhausted: clonePtr(r.Exhausted),
		Fallback: clonePtr(r.Fallback)}
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// ApplyEnv applies the environment over the loaded values: a non-empty
// AGENTQ_REDIS_URL replaces Redis.URL. getenv nil means os.Getenv. Call
// Validate afterwards (Load does).
func (c *Config) ApplyEnv(getenv func(string) string) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if u := getenv(EnvRedisURL); u != "" {
		c.Redis.UseURL(u)
		c.redisFromEnv = true
	}
}

// UseURL makes u the whole Redis location, as AGENTQ_REDIS_URL and --redis
// do: the file's sentinel or cluster block no longer applies (u may name a
// Sentinel group or a Cluster itself).
func (r *Redis) UseURL(u string) {
	r.URL, r.Sentinel, r.Cluster = u, nil, nil
}

// Agent returns the resolved settings of the agent called name and whether
// the config names it. For an agent the config does not name it returns an
// Agent with the default settings, which is what a Go-function agent
// registered only in code runs with.
//
// It is the one place an agent's defaults that depend on other settings are
// applied (the worker, the API, the console and the CLIs all read an agent
// through it): BreakerKey defaults to the agent's name and Limits.Key to the
// breaker key. The returned Agent shares no slice or pointer with c.
func (c *Config) Agent(name string) (Agent, bool) {
	a, ok := c.Agents[name]
	if !ok {
		return Agent{Name: name, BreakerKey: name, Settings: c.Defaults.Clone()}, false
	}
	a.Name = name
	if a.BreakerKey == "" {
		a.BreakerKey = name
	}
	a.Settings = a.Settings.Clone()
	a.Fallback = slices.Clone(a.Fallback)
	a.Notify = slices.Clone(a.Notify)
	if a.Health != nil {
		h := *a.Health
		h.Command = slices.Clone(h.Command)
		a.Health = &h
	}
	if a.Limits != nil {
		l := *a.Limits
		if l.Key == "" {
			l.Key = a.BreakerKey
		}
		a.Limits = &l
	}
	if a.Budget != nil {
		b := *a.Budget
		a.Budget = &b
	}
	return a, true
}

// LeaseMargin is what a lease adds to the timeout of the call it covers: a
// breaker's half-open trial and a concurrency slot a call holds are
// presumed lost (and freed) Lease(timeout) after they were taken.
const LeaseMargin = 5 * time.Second

// Lease is how long a breaker trial or a limits slot taken for a call of
// the given timeout (an agent's timeout, a health probe's) is held before
// it is presumed lost: timeout + LeaseMargin, so that a call that ends by
// its own timeout always hands its lease back first.
func Lease(timeout time.Duration) time.Duration { return timeout + LeaseMargin }

// ClientOptions are the tasks.Client options every producer (enqueuer,
// the HTTP API, a requeue) takes from c: history.retention, the served
// queues (worker.queues), and redis.wait_replicas / wait_timeout.
func (c *Config) ClientOptions() []tasks.ClientOption {
	return []tasks.ClientOption{tasks.WithRetention(c.History.Retention), tasks.WithQueues(c.ServedQueues()...),
		tasks.WithWaitReplicas(c.Redis.WaitReplicas, c.Redis.WaitTimeout)}
}

// AgentQueue is the queue a task for agent goes to when its producer
// names none: the agent's queue, else DefaultQueue.
func (c *Config) AgentQueue(agent string) string {
	if a, ok := c.Agents[agent]; ok && a.Queue != "" {
		return a.Queue
	}
	return DefaultQueue
}

// AgentNames returns the names of the configured agents, sorted.
func (c *Config) AgentNames() []string {
	names := slices.Collect(maps.Keys(c.Agents))
	sort.Strings(names)
	return names
}

// ServedQueues returns the queues of worker.queues, sorted: the queues a
// worker with this config serves ({"default"} when none are set). The HTTP
// API and enqueuer refuse a task for any other queue.
func (c *Config) ServedQueues() []string {
	if len(c.Worker.Queues) == 0 {
		return []string{DefaultQueue}
	}
	return slices.Sorted(maps.Keys(c.Worker.Queues))
}
