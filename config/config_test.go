package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/resilience"
)

func TestDefault(t *testing.T) {
	t.Parallel()
	c := Default()
	require.NoError(t, c.Validate())
	require.Equal(t, "redis://127.0.0.1:6379/0", c.Redis.URL)
	require.Equal(t, 20, c.Worker.Concurrency)
	require.Equal(t, 30*time.Second, c.Worker.ShutdownTimeout)
	require.Equal(t, "", c.Worker.HTTPAddr)
	require.Equal(t, map[string]int{"default": 1}, c.Worker.Queues)
	require.Equal(t, time.Second, c.Worker.PollInterval)
	require.Equal(t, 50*time.Millisecond, c.Worker.ForwardInterval)
	require.Equal(t, Settings{
		Timeout:        30 * time.Second,
		Retry:          Retry{MaxAttempts: 3, InitialBackoff: 500 * time.Millisecond, MaxBackoff: 5 * time.Second, Jitter: 0.2, MaxRetryAfter: 60 * time.Second},
		CircuitBreaker: Breaker{Window: 30 * time.Second, FailureRate: 0.5, MinCalls: 100, MinFailingTasks: 3, Cooldown: 60 * time.Second, MaxCooldown: 10 * time.Minute, HalfOpenMaxCalls: 1},
		Restart:        Restart{MaxRestarts: 3, Delays: []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute}, MaxPending: 10000},
	}, c.Defaults.Settings)
	require.Empty(t, c.Agents)
	require.Equal(t, 168*time.Hour, c.History.Retention)
	require.Equal(t, Alerts{Threshold: 10, Window: 5 * time.Minute}, c.Alerts)
	require.Equal(t, "", c.Path)
}

// legacyBreaker is a circuit_breaker block of a file written before rate
// mode: failure_threshold, cooldown and half_open_max_calls set, the rate
// fields at their defaults.
func legacyBreaker(threshold int, cooldown time.Duration, halfOpen int) Breaker {
	b := DefaultSettings().CircuitBreaker
	b.FailureThreshold, b.Cooldown, b.HalfOpenMaxCalls = threshold, cooldown, halfOpen
	return b
}

// TestBreakerModeMigration: failure_threshold without mode keeps
// consecutive mode, with a deprecation naming the field; mode alone, or
// nothing, is rate mode without one.
func TestBreakerModeMigration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, yaml string
		mode       string
		deprecated []string
	}{
		{"nothing: rate", "agents:\n  a:\n    exec: {command: [x]}\n", BreakerModeRate, nil},
		{"failure_threshold alone: consecutive", "defaults:\n  circuit_breaker: {failure_threshold: 3}\nagents:\n  a:\n    exec: {command: [x]}\n",
			BreakerModeConsecutive, []string{"defaults.circuit_breaker.failure_threshold without mode"}},
		{"an agent's failure_threshold alone", "agents:\n  a:\n    exec: {command: [x]}\n    circuit_breaker: {failure_threshold: 5}\n",
			BreakerModeConsecutive, []string{"agents.a.circuit_breaker.failure_threshold without mode"}},
		{"explicit consecutive", "defaults:\n  circuit_breaker: {mode: consecutive, failure_threshold: 3}\nagents:\n  a:\n    exec: {command: [x]}\n",
			BreakerModeConsecutive, nil},
		{"explicit rate ignores failure_threshold", "defaults:\n  circuit_breaker: {mode: rate, failure_threshold: 3}\nagents:\n  a:\n    exec: {command: [x]}\n",
			BreakerModeRate, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Parse([]byte(tt.yaml), "agentq.yaml")
			require.NoError(t, err)
			require.Equal(t, tt.mode, c.Agents["a"].CircuitBreaker.ResolvedMode())
			got := c.Deprecations()
			require.Len(t, got, len(tt.deprecated))
			for i, d := range tt.deprecated {
				require.Contains(t, got[i], d)
			}
		})
	}
}

func TestDesignSample(t *testing.T) {
	t.Parallel()
	c, err := Load("testdata/design.yaml")
	require.NoError(t, err)
	require.Equal(t, "testdata/design.yaml", c.Path)
	require.Equal(t, "127.0.0.1:9090", c.Worker.HTTPAddr)
	want := DefaultSettings()
	want.CircuitBreaker.Mode = BreakerModeRate // the sample names the default mode
	require.Equal(t, want, c.Defaults.Settings)
	require.Equal(t, []string{"git_agent", "llm"}, c.AgentNames())

	git, ok := c.Agent("git_agent")
	require.True(t, ok)
	require.Equal(t, 10*time.Second, git.Timeout)
	require.Equal(t, &Exec{Command: []string{"./agents/git-agent", "--json"}, Env: []string{"PATH", "HOME"}}, git.Exec)
	require.Nil(t, git.HTTP)
	require.Equal(t, "git_agent", git.BreakerKey)
	require.Equal(t, c.Defaults.Retry, git.Retry)

	llm, ok := c.Agent("llm")
	require.True(t, ok)
	require.Nil(t, llm.Exec)
	require.Equal(t, &HTTP{
		URL:     "https://llm.example/v1/chat/completions",
		Headers: map[string]string{"Authorization": "Bearer ${LLM_API_KEY}"},
		Body:    BodyRequest,
	}, llm.HTTP)
	require.Equal(t, "llm.example", llm.BreakerKey)
	require.Equal(t, Retry{MaxAttempts: 5, InitialBackoff: 500 * time.Millisecond, MaxBackoff: 5 * time.Second, Jitter: 0.2, MaxRetryAfter: time.Minute}, llm.Retry)
	require.Equal(t, 30*time.Second, llm.Timeout)
	require.Equal(t, c.Defaults.CircuitBreaker, llm.CircuitBreaker)
	require.Equal(t, c.Defaults.Restart, llm.Restart)

	require.Equal(t, map[string]string{"Authorization": "Bearer sk-123"},
		llm.HTTP.ExpandHeaders(func(k string) string { return map[string]string{"LLM_API_KEY": "sk-123"}[k] }))

	// An agent the file does not name gets the defaults.
	fn, ok := c.Agent("summarize")
	require.False(t, ok)
	require.Equal(t, Agent{Name: "summarize", BreakerKey: "summarize", Settings: c.Defaults.Settings}, fn)
}

func TestFullFile(t *testing.T) {
	t.Parallel()
	c, err := Load("testdata/full.yaml")
	require.NoError(t, err)
	require.Equal(t, "rediss://user:pass@redis.internal:6380/2", c.Redis.URL)
	require.Equal(t, Worker{
		Concurrency: 8, ShutdownTimeout: 45 * time.Second, HTTPAddr: ":9090",
		Queues:       map[string]int{"critical": 6, "default": 3, "low": 1},
		PollInterval: 5 * time.Millisecond, ForwardInterval: 20 * time.Millisecond,
	}, c.Worker)
	tru, fal, dl := true, false, "dead_letter"
	require.Equal(t, Settings{
		Timeout:        20 * time.Second,
		Retry:          Retry{MaxAttempts: 4, InitialBackoff: 250 * time.Millisecond, MaxBackoff: 8 * time.Second, Jitter: 0, MaxRetryAfter: 2 * time.Minute},
		CircuitBreaker: legacyBreaker(5, 30*time.Second, 2),
		Restart:        Restart{MaxRestarts: 2, Delays: []time.Duration{30 * time.Second}, MaxPending: 500},
		Classes: map[resilience.Class]ClassRule{
			resilience.RateLimited:   {Retry: &tru, Breaker: &fal},
			resilience.ProviderError: {Exhausted: &dl},
		},
	}, c.Defaults.Settings)

	tool := c.Agents["tool"]
	require.Equal(t, &Exec{Command: []string{"/usr/bin/tool", "--json"}, Env: []string{"PATH", "MODE=fast"}, Dir: "/tmp", MaxOutputBytes: 1 << 20}, tool.Exec)
	require.Equal(t, Restart{MaxRestarts: 0, Delays: []time.Duration{}, MaxPending: 500}, tool.Restart)
	// classes merge per class and per field.
	require.Equal(t, map[resilience.Class]ClassRule{
		resilience.RateLimited:   {Retry: &tru, Breaker: &fal, Exhausted: &dl},
		resilience.ProviderError: {Exhausted: &dl},
	}, tool.Classes)
	require.Nil(t, c.Defaults.Classes[resilience.RateLimited].Exhausted, "agent override leaked into defaults")

	api := c.Agents["api"]
	require.Equal(t, &HTTP{
		URL:              "http://127.0.0.1:8080/run",
		Headers:          map[string]string{"X-Retries": "3", "Authorization": "Bearer ${API_TOKEN}"},
		Body:             BodyParams,
		MaxResponseBytes: 65536,
	}, api.HTTP)
	require.Equal(t, legacyBreaker(5, 10*time.Second, 2), api.CircuitBreaker)

	gofunc := c.Agents["gofunc"]
	require.Nil(t, gofunc.Exec)
	require.Nil(t, gofunc.HTTP)
	require.Equal(t, time.Minute, gofunc.Timeout)
	require.Equal(t, c.Defaults.Retry, gofunc.Retry)

	require.Equal(t, 72*time.Hour, c.History.Retention)
	require.Equal(t, Alerts{Threshold: 3, Window: time.Minute, WebhookURL: "https://hooks.example/agentq"}, c.Alerts)
}

func TestFieldByFieldMerge(t *testing.T) {
	t.Parallel()
	// agents come before defaults in the file on purpose: order must not matter.
	c, err := Parse([]byte(`
agents:
  a:
    retry: {max_backoff: 9s}
    circuit_breaker: {half_open_max_calls: 4}
    restart: {max_pending: 7}
  b: {}
  c:
defaults:
  timeout: 3s
  retry: {max_attempts: 7, initial_backoff: 1s}
  restart: {delays: [5s, 10s]}
`), "merge.yaml")
	require.NoError(t, err)
	require.Equal(t, 3*time.Second, c.Defaults.Timeout)
	require.Equal(t, Retry{MaxAttempts: 7, InitialBackoff: time.Second, MaxBackoff: 5 * time.Second, Jitter: 0.2, MaxRetryAfter: time.Minute}, c.Defaults.Retry)

	a := c.Agents["a"]
	require.Equal(t, 3*time.Second, a.Timeout)
	require.Equal(t, Retry{MaxAttempts: 7, InitialBackoff: time.Second, MaxBackoff: 9 * time.Second, Jitter: 0.2, MaxRetryAfter: time.Minute}, a.Retry)
	require.Equal(t, legacyBreaker(0, time.Minute, 4), a.CircuitBreaker)
	require.Equal(t, Restart{MaxRestarts: 3, Delays: []time.Duration{5 * time.Second, 10 * time.Second}, MaxPending: 7}, a.Restart)

	require.Equal(t, c.Defaults.Settings, c.Agents["b"].Settings)
	require.Equal(t, c.Defaults.Settings, c.Agents["c"].Settings)
	cAgent, _ := c.Agent("c")
	require.Equal(t, "c", cAgent.BreakerKey)

	// Resolved agents do not share slices with the defaults.
	a.Restart.Delays[0] = time.Hour
	require.Equal(t, 5*time.Second, c.Defaults.Restart.Delays[0])
	got, _ := c.Agent("b")
	got.Restart.Delays[0] = time.Hour
	require.Equal(t, 5*time.Second, c.Agents["b"].Restart.Delays[0])
}

func TestApplyEnv(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte("redis: {url: redis://file:6379/1}\n"), "env.yaml")
	require.NoError(t, err)

	c.ApplyEnv(func(string) string { return "" })
	require.Equal(t, "redis://file:6379/1", c.Redis.URL, "empty variable must not override")

	env := map[string]string{"AGENTQ_REDIS_URL": "rediss://env:6380/0"}
	c.ApplyEnv(func(k string) string { return env[k] })
	require.Equal(t, "rediss://env:6380/0", c.Redis.URL)
	require.NoError(t, c.Validate())

	// A bad URL from the environment is blamed on the environment.
	c.ApplyEnv(func(string) string { return "http://nope" })
	err = c.Validate()
	require.ErrorIs(t, err, ErrInvalid)
	require.Contains(t, err.Error(), "AGENTQ_REDIS_URL: redis.url: scheme \"http\" not supported")
}

func TestLoadAppliesEnv(t *testing.T) {
	// Not parallel: it sets a process environment variable.
	t.Setenv(EnvRedisURL, "redis://from-env:6379/3")
	c, err := Load("testdata/design.yaml")
	require.NoError(t, err)
	require.Equal(t, "redis://from-env:6379/3", c.Redis.URL)

	c, err = Load("")
	require.NoError(t, err)
	require.Equal(t, "redis://from-env:6379/3", c.Redis.URL)

	// The env value rescues a file whose own URL is bad.
	dir := t.TempDir()
	path := filepath.Join(dir, "agentq.yaml")
	require.NoError(t, os.WriteFile(path, []byte("redis: {url: 'ftp://x'}\n"), 0o600))
	_, err = Load(path)
	require.NoError(t, err)
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	_, err := Load(filepath.Join(t.TempDir(), "missing.yaml"))
	require.ErrorIs(t, err, os.ErrNotExist)
	require.Contains(t, err.Error(), "missing.yaml")

	dir := t.TempDir()
	path := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(path, []byte("worker:\n  concurrency: 0\n"), 0o600))
	_, err = Load(path)
	require.ErrorIs(t, err, ErrInvalid)
	require.Contains(t, err.Error(), path+":2: worker.concurrency: must be at least 1")
}

func TestEmptyAndCommentOnly(t *testing.T) {
	t.Parallel()
	for _, src := range []string{"", "\n\n", "# nothing\n", "---\n", "null\n", "~"} {
		c, err := Parse([]byte(src), "e.yaml")
		require.NoError(t, err, "%q", src)
		want := Default()
		want.Path = "e.yaml"
		require.Equal(t, want.Worker, c.Worker)
		require.Equal(t, want.Defaults, c.Defaults)
		require.Equal(t, want.Redis, c.Redis)
		require.Equal(t, "e.yaml", c.Path)
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		yaml  string
		line  int    // 0: no line expected
		field string // dotted path expected in the message
		want  string // substring of the reason
	}{
		{"unknown top-level", "workers:\n  concurrency: 3\n", 1, "workers", "unknown field (did you mean worker?)"},
		{"unknown agent field", "agents:\n  llm:\n    http: {url: 'https://x'}\n    retri: {max_attempts: 2}\n", 4, "agents.llm.retri", "unknown field (did you mean retry?)"},
		{"unknown nested field", "defaults:\n  retry:\n    max_attempt: 2\n", 3, "defaults.retry.max_attempt", "did you mean max_attempts?"},
		{"unknown exec field", "agents:\n  a:\n    exec: {command: [x], cmd: y}\n", 3, "agents.a.exec.cmd", "unknown field"},
		{"unknown class field", "defaults:\n  classes:\n    timeout: {retri: true}\n", 3, "defaults.classes.timeout.retri", "did you mean retry?"},
		{"duplicate key", "worker:\n  concurrency: 2\n  concurrency: 3\n", 3, "worker.concurrency", "defined more than once"},
		{"int as string", "worker:\n  concurrency: many\n", 2, "worker.concurrency", `must be an integer, got string "many"`},
		{"int as float", "worker:\n  concurrency: 2.5\n", 2, "worker.concurrency", "must be an integer"},
		{"section not a mapping", "worker: 3\n", 1, "worker", "must be a mapping, got integer"},
		{"list not a list", "agents:\n  a:\n    exec: {command: ls}\n", 3, "agents.a.exec.command", "must be a list"},
		{"string as int", "redis:\n  url: 42\n", 2, "redis.url", "must be a string"},
		{"bool as string", "defaults:\n  classes:\n    timeout: {retry: sometimes}\n", 3, "defaults.classes.timeout.retry", "must be true or false"},
		{"jitter not number", "defaults:\n  retry: {jitter: lots}\n", 2, "defaults.retry.jitter", "must be a number"},
		{"bare number duration", "defaults:\n  timeout: 30\n", 2, "defaults.timeout", "30 has no unit: write a Go duration such as 30s"},
		{"bad duration", "agents:\n  a:\n    timeout: soon\n", 3, "agents.a.timeout", `"soon" is not a duration`},
		{"bare number in delays", "defaults:\n  restart:\n    delays: [1m, 2]\n", 3, "defaults.restart.delays[1]", "has no unit"},
		{"zero timeout", "defaults:\n  timeout: 0s\n", 2, "defaults.timeout", "must be a positive duration"},
		{"negative agent timeout", "agents:\n  a:\n    timeout: -1s\n", 3, "agents.a.timeout", "must be a positive duration"},
		{"zero initial_backoff", "defaults:\n  retry: {initial_backoff: 0s}\n", 2, "defaults.retry.initial_backoff", "positive"},
		{"negative max_backoff", "agents:\n  a:\n    retry:\n      max_backoff: -5s\n", 4, "agents.a.retry.max_backoff", "positive"},
		{"zero cooldown", "defaults:\n  circuit_breaker: {cooldown: 0s}\n", 2, "defaults.circuit_breaker.cooldown", "positive"},
		{"negative delay", "defaults:\n  restart:\n    delays:\n      - 1m\n      - -2m\n", 5, "defaults.restart.delays[1]", "positive"},
		{"zero shutdown_timeout", "worker:\n  shutdown_timeout: 0s\n", 2, "worker.shutdown_timeout", "positive"},
		{"zero poll_interval", "worker:\n  poll_interval: 0s\n", 2, "worker.poll_interval", "positive"},
		{"zero forward_interval", "worker:\n  forward_interval: -1ms\n", 2, "worker.forward_interval", "positive"},
		{"zero window", "alerts:\n  window: 0s\n", 2, "alerts.window", "positive"},
		{"zero retention", "history:\n  retention: 0s\n", 2, "history.retention", "positive"},
		{"zero usage retention", "usage:\n  retention: 0s\n", 2, "usage.retention", "positive"},
		{"zero usage max_series", "usage:\n  max_series: 0\n", 2, "usage.max_series", "at least 1"},
		{"zero max_retry_after", "defaults:\n  retry: {max_retry_after: 0s}\n", 2, "defaults.retry.max_retry_after", "positive"},
		{"max_backoff below initial", "defaults:\n  retry:\n    initial_backoff: 2s\n    max_backoff: 1s\n", 4, "defaults.retry.max_backoff", "must not be less than initial_backoff"},
		{"agent initial above inherited max", "agents:\n  a:\n    retry: {initial_backoff: 10s}\n", 3, "agents.a.retry.initial_backoff", "max_backoff (5s) must not be less than initial_backoff (10s)"},
		{"jitter above 1", "defaults:\n  retry: {jitter: 1.5}\n", 2, "defaults.retry.jitter", "must be between 0 and 1"},
		{"jitter negative", "agents:\n  a:\n    retry: {jitter: -0.1}\n", 3, "agents.a.retry.jitter", "between 0 and 1"},
		{"jitter nan", "defaults:\n  retry: {jitter: .nan}\n", 2, "defaults.retry.jitter", "between 0 and 1"},
		{"max_attempts zero", "agents:\n  git_agent:\n    exec: {command: [git]}\n    retry:\n      max_attempts: 0\n", 5, "agents.git_agent.retry.max_attempts", "must be at least 1"},
		{"failure_threshold negative", "defaults:\n  circuit_breaker: {failure_threshold: -1}\n", 2, "defaults.circuit_breaker.failure_threshold", "at least 1"},
		{"breaker mode unknown", "defaults:\n  circuit_breaker: {mode: ratio}\n", 2, "defaults.circuit_breaker.mode", `must be "rate" or "consecutive"`},
		{"failure_rate above 1", "agents:\n  a:\n    circuit_breaker: {failure_rate: 1.5}\n", 3, "agents.a.circuit_breaker.failure_rate", "(0, 1]"},
		{"failure_rate zero", "defaults:\n  circuit_breaker: {failure_rate: 0}\n", 2, "defaults.circuit_breaker.failure_rate", "(0, 1]"},
		{"breaker window zero", "defaults:\n  circuit_breaker: {window: 0s}\n", 2, "defaults.circuit_breaker.window", "positive"},
		{"min_calls zero", "defaults:\n  circuit_breaker: {min_calls: 0}\n", 2, "defaults.circuit_breaker.min_calls", "at least 1"},
		{"min_failing_tasks zero", "defaults:\n  circuit_breaker: {min_failing_tasks: 0}\n", 2, "defaults.circuit_breaker.min_failing_tasks", "at least 1"},
		{"max_cooldown zero", "agents:\n  a:\n    circuit_breaker: {max_cooldown: 0s}\n", 3, "agents.a.circuit_breaker.max_cooldown", "positive"},
		{"half_open_max_calls zero", "defaults:\n  circuit_breaker: {half_open_max_calls: 0}\n", 2, "defaults.circuit_breaker.half_open_max_calls", "at least 1"},
		{"max_restarts negative", "defaults:\n  restart: {max_restarts: -1}\n", 2, "defaults.restart.max_restarts", "at least 0"},
		{"empty delays", "defaults:\n  restart:\n    max_restarts: 2\n    delays: []\n", 4, "defaults.restart.delays", "must list at least one delay when max_restarts is 2"},
		{"agent empty delays with inherited max_restarts", "agents:\n  a:\n    restart: {delays: []}\n", 3, "agents.a.restart.delays", "at least one delay"},
		{"max_pending zero", "defaults:\n  restart: {max_pending: 0}\n", 2, "defaults.restart.max_pending", "at least 1"},
		{"concurrency zero", "worker:\n  concurrency: 0\n", 2, "worker.concurrency", "must be at least 1, got 0"},
		{"queue priority zero", "worker:\n  queues: {default: 0}\n", 2, "worker.queues.default", "at least 1"},
		{"no queues", "worker:\n  queues: {}\n", 2, "worker.queues", "at least one queue"},
		{"bad http_addr", "worker:\n  http_addr: localhost\n", 2, "worker.http_addr", "host:port"},
		{"exec and http", "agents:\n  both:\n    exec: {command: [x]}\n    http: {url: 'https://x'}\n", 2, "agents.both", "has both exec and http"},
		{"exec empty command", "agents:\n  a:\n    exec: {command: []}\n", 3, "agents.a.exec.command", "must name the program"},
		{"exec missing command", "agents:\n  a:\n    exec: {dir: /tmp}\n", 3, "agents.a.exec.command", "must name the program"},
		{"exec blank program", "agents:\n  a:\n    exec:\n      command: ['', x]\n", 4, "agents.a.exec.command[0]", "must not be empty"},
		{"exec bad env", "agents:\n  a:\n    exec:\n      command: [x]\n      env: [PATH, '=x']\n", 5, "agents.a.exec.env[1]", "want NAME or NAME=value"},
		{"exec negative cap", "agents:\n  a:\n    exec:\n      command: [x]\n      max_output_bytes: -1\n", 5, "agents.a.exec.max_output_bytes", "negative"},
		{"http relative url", "agents:\n  a:\n    http:\n      url: /v1/chat\n", 4, "agents.a.http.url", "absolute http:// or https://"},
		{"http ftp url", "agents:\n  a:\n    http: {url: 'ftp://x/y'}\n", 3, "agents.a.http.url", "absolute http"},
		{"http missing url", "agents:\n  a:\n    http: {body: params}\n", 3, "agents.a.http.url", "must not be empty"},
		{"http bad body", "agents:\n  a:\n    http:\n      url: https://x\n      body: json\n", 5, "agents.a.http.body", "must be request or params"},
		{"http bad placeholder", "agents:\n  a:\n    http:\n      url: https://x\n      headers:\n        Authorization: 'Bearer ${KEY'\n", 6, "agents.a.http.headers.Authorization", "unterminated ${"},
		{"http header not scalar", "agents:\n  a:\n    http:\n      url: https://x\n      headers: {A: [1]}\n", 5, "agents.a.http.headers.A", "must be a string"},
		{"redis scheme", "redis:\n  url: http://127.0.0.1:6379\n", 2, "redis.url", `scheme "http" not supported: use redis://, rediss:// (TLS), unix://, redis+sentinel:// or redis+cluster://`},
		{"redis no scheme", "redis:\n  url: 127.0.0.1:6379\n", 2, "redis.url", ""},
		{"redis two topologies", "redis:\n  url: redis://h:1\n  cluster: {addrs: ['h:7000']}\n", 1, "redis", "more than one of url, sentinel and cluster"},
		{"redis sentinel and cluster", "redis:\n  sentinel: {master_name: m, addrs: ['h:26379']}\n  cluster: {addrs: ['h:7000']}\n", 1, "redis", "choose one topology"},
		{"sentinel no master", "redis:\n  sentinel:\n    addrs: ['h:26379']\n", 2, "redis.sentinel.master_name", "must name the master"},
		{"sentinel no addrs", "redis:\n  sentinel:\n    master_name: m\n", 2, "redis.sentinel.addrs", "at least one host:port"},
		{"sentinel bad addr", "redis:\n  sentinel:\n    master_name: m\n    addrs: ['h:26379', 'h']\n", 4, "redis.sentinel.addrs[1]", `address "h" is not host:port`},
		{"sentinel negative db", "redis:\n  sentinel:\n    master_name: m\n    addrs: ['h:1']\n    db: -1\n", 5, "redis.sentinel.db", "≥ 0"},
		{"sentinel bad placeholder", "redis:\n  sentinel:\n    master_name: m\n    addrs: ['h:1']\n    password: '${PW'\n", 5, "redis.sentinel.password", "unterminated ${"},
		{"cluster bad port", "redis:\n  cluster:\n    addrs: ['h:99999']\n", 3, "redis.cluster.addrs[0]", "port is not a number"},
		{"cluster no addrs", "redis:\n  cluster: {password: x}\n", 2, "redis.cluster.addrs", "at least one host:port"},
		{"sentinel URL without master", "redis:\n  url: 'redis+sentinel://h:26379'\n", 2, "redis.url", "no master name"},
		{"cluster URL bad host", "redis:\n  url: 'redis+cluster://h:7000,nohost'\n", 2, "redis.url", `address "nohost" is not host:port`},
		{"wait_replicas negative", "redis:\n  wait_replicas: -1\n", 2, "redis.wait_replicas", "≥ 0"},
		{"wait_timeout zero", "redis:\n  wait_timeout: 0s\n", 2, "redis.wait_timeout", "positive duration"},
		{"agent queue not served", "agents:\n  a:\n    queue: llm\n", 3, "agents.a.queue", `"llm", which worker.queues does not list (served queues: default)`},
		{"agent queue with brace", "agents:\n  a:\n    queue: 'l{m}'\n", 3, "agents.a.queue", "invalid queue name"},
		{"redis unix without path", "redis:\n  url: 'unix://'\n", 2, "redis.url", "no socket path"},
		{"unknown class", "defaults:\n  classes:\n    rate_limted: {retry: true}\n", 3, "defaults.classes.rate_limted", "unknown error class (did you mean rate_limited?)"},
		{"unknown class far", "agents:\n  a:\n    classes:\n      boom: {retry: true}\n", 4, "agents.a.classes.boom", "want one of network_transient"},
		{"canceled class", "defaults:\n  classes:\n    canceled: {retry: true}\n", 3, "defaults.classes.canceled", "cannot be configured"},
		{"bad exhausted", "defaults:\n  classes:\n    timeout: {exhausted: retry}\n", 3, "defaults.classes.timeout.exhausted", "must be restart or dead_letter"},
		{"agent name with space", "agents:\n  'my agent': {timeout: 1s}\n", 2, "agents.my agent", "invalid agent name"},
		{"agent name with brace", "agents:\n  'a{b}': {}\n", 2, "agents.a{b}", "invalid agent name"},
		{"agent name empty", "agents:\n  '': {}\n", 2, "agents.", "must not be empty"},
		{"breaker key with space", "agents:\n  a: {breaker_key: 'x y'}\n", 2, "agents.a.breaker_key", "invalid breaker key"},
		{"alerts threshold", "alerts:\n  threshold: 0\n", 2, "alerts.threshold", "at least 1"},
		{"alerts webhook", "alerts:\n  webhook_url: hooks.example\n", 2, "alerts.webhook_url", "absolute http"},
		{"schemeless webhook is not echoed", "alerts:\n  webhook_url: hooks.slack.com/services/T0/B0/SECRETPATH\n", 2, "alerts.webhook_url", "got no scheme"},
		{"agent not mapping", "agents:\n  a: [1]\n", 2, "agents.a", "must be a mapping, got a list"},
		{"agents not mapping", "agents: [a, b]\n", 1, "agents", "must be a mapping"},
		{"root not mapping", "- a\n- b\n", 1, "", "must be a mapping"},
		{"two documents", "worker: {}\n---\nworker: {}\n", 2, "", "more than one YAML document"},
		{"syntax error", "worker:\n  a: 1\n  b: \"x\n", 3, "", "invalid YAML: found unexpected end of stream"},
		{"syntax error mapping", "agents:\n  a: b: c\n", 2, "", "invalid YAML: mapping values are not allowed"},
		{"non-string key", "worker:\n  [a]: 1\n", 2, "worker", "keys must be strings"},
		{"bad merge", "defaults:\n  <<: 3\n", 2, "defaults", "merge key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			requireFieldError(t, tt.yaml, tt.line, tt.field, tt.want)
		})
	}
}

// requireFieldError parses yaml and requires one invalid-config error
// naming the file, line and field, whose message contains want.
func requireFieldError(t *testing.T, yaml string, line int, field, want string) {
	t.Helper()
	c, err := Parse([]byte(yaml), "agentq.yaml")
	require.Error(t, err)
	require.Nil(t, c)
	require.ErrorIs(t, err, ErrInvalid)
	var fe *FieldError
	require.ErrorAs(t, err, &fe)
	msg := err.Error()
	prefix := "agentq.yaml:"
	if line > 0 {
		prefix += strconv.Itoa(line) + ":"
	}
	if field != "" {
		prefix += " " + field + ":"
	}
	require.Contains(t, msg, prefix, "message must name file, line and field")
	require.Contains(t, msg, want)
	require.Equal(t, "agentq.yaml", fe.File)
	require.Equal(t, line, fe.Line)
	require.Equal(t, field, fe.Field)
}

func TestSeveralErrorsReportedInLineOrder(t *testing.T) {
	t.Parallel()
	_, err := Parse([]byte(`worker:
  concurrency: 0
defaults:
  timeout: -1s
agents:
  llm:
    retri: {}
`), "agentq.yaml")
	require.ErrorIs(t, err, ErrInvalid)
	// Unknown fields are found while decoding, before values are checked.
	require.Equal(t, "agentq.yaml:7: agents.llm.retri: unknown field (did you mean retry?)", err.Error())

	_, err = Parse([]byte(`worker:
  concurrency: 0
defaults:
  timeout: -1s
  retry: {jitter: 2}
`), "agentq.yaml")
	lines := strings.Split(err.Error(), "\n")
	require.Equal(t, []string{
		"agentq.yaml:2: worker.concurrency: must be at least 1, got 0",
		"agentq.yaml:4: defaults.timeout: must be a positive duration, got -1s",
		"agentq.yaml:5: defaults.retry.jitter: must be between 0 and 1, got 2",
	}, lines)
	var fe *FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "worker.concurrency", fe.Field)
}

func TestInheritedErrorReportedOnce(t *testing.T) {
	t.Parallel()
	_, err := Parse([]byte("defaults:\n  timeout: 0s\nagents:\n  a: {}\n  b: {retry: {max_attempts: 2}}\n"), "x.yaml")
	require.Equal(t, "x.yaml:2: defaults.timeout: must be a positive duration, got 0s", err.Error())
}

func TestValidateBuiltInGo(t *testing.T) {
	t.Parallel()
	c := Default()
	c.Agents["a"] = Agent{Name: "a", Exec: &Exec{}, Settings: c.Defaults.Clone()}
	c.Worker.Concurrency = -1
	err := c.Validate()
	require.ErrorIs(t, err, ErrInvalid)
	require.Equal(t, "worker.concurrency: must be at least 1, got -1\nagents.a.exec.command: must name the program to run", err.Error())

	var fe *FieldError
	require.True(t, errors.As(err, &fe))
	require.Equal(t, 0, fe.Line)
}

func TestExplicitZeroesAreKept(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte(`
defaults:
  retry: {jitter: 0}
  restart: {max_restarts: 0, delays: []}
`), "z.yaml")
	require.NoError(t, err)
	require.Zero(t, c.Defaults.Retry.Jitter)
	require.Zero(t, c.Defaults.Restart.MaxRestarts)
	require.Empty(t, c.Defaults.Restart.Delays)
}

func TestNullValuesKeepDefaults(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte("worker:\n  concurrency:\ndefaults:\n  retry:\n  timeout: ~\nagents:\n  a:\n    exec:\n"), "n.yaml")
	require.NoError(t, err)
	require.Equal(t, 20, c.Worker.Concurrency)
	require.Equal(t, DefaultSettings(), c.Defaults.Settings)
	require.Nil(t, c.Agents["a"].Exec)
}

func TestExpandHeaders(t *testing.T) {
	t.Parallel()
	h := HTTP{Headers: map[string]string{
		"A": "Bearer ${K}",
		"B": "$K and ${K}${K}",
		"C": "open ${K",
		"D": "${MISSING}x",
	}}
	got := h.ExpandHeaders(func(k string) string { return map[string]string{"K": "v"}[k] })
	require.Equal(t, map[string]string{"A": "Bearer v", "B": "$K and vv", "C": "open ${K", "D": "x"}, got)
}

func TestSuggest(t *testing.T) {
	t.Parallel()
	require.Equal(t, " (did you mean retry?)", suggest("retri", []string{"restart", "retry", "timeout"}))
	require.Equal(t, " (did you mean timeout?)", suggest("Timeout", []string{"restart", "retry", "timeout"}))
	require.Equal(t, " (want one of a, b)", suggest("zzzzzz", []string{"a", "b"}))
	require.Equal(t, 3, editDistance("kitten", "sitting"))
}

func TestAliasBombIsBounded(t *testing.T) {
	t.Parallel()
	// Each level merges the previous one three times: 3^24 expansions if
	// decoding followed them all.
	var b strings.Builder
	b.WriteString("agents:\n  x0: &x0 {timeout: 1s}\n")
	for i := 1; i < 25; i++ {
		fmt.Fprintf(&b, "  x%d: &x%d {<<: [*x%d, *x%d, *x%d]}\n", i, i, i-1, i-1, i-1)
	}
	b.WriteString("defaults: *x24\n")
	done := make(chan error, 1)
	go func() {
		_, err := Parse([]byte(b.String()), "bomb.yaml")
		done <- err
	}()
	select {
	case err := <-done:
		require.ErrorIs(t, err, ErrInvalid)
		require.Contains(t, err.Error(), "bomb.yaml:")
		require.Contains(t, err.Error(), "too many alias or merge-key expansions")
	case <-time.After(10 * time.Second):
		t.Fatal("Parse did not return within 10s")
	}
}

func TestFileSizeCap(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// A valid document of comments, one byte over the limit: it must be
	// refused before it is decoded, naming the file and the limit.
	comments := func(n int) []byte {
		line := "# " + strings.Repeat("x", 77) + "\n"
		b := []byte(strings.Repeat(line, n/len(line)+1))[:n]
		b[n-1] = '\n'
		return b
	}
	over := filepath.Join(dir, "over.yaml")
	require.NoError(t, os.WriteFile(over, comments(MaxFileSize+1), 0o600))
	_, err := Load(over)
	require.ErrorIs(t, err, ErrTooLarge)
	require.ErrorIs(t, err, ErrInvalid)
	require.Contains(t, err.Error(), over)
	require.Contains(t, err.Error(), "4 MiB limit")

	_, err = Parse(comments(MaxFileSize+1), "inline.yaml")
	require.ErrorIs(t, err, ErrTooLarge)
	require.Contains(t, err.Error(), "inline.yaml")

	// Exactly the limit is accepted.
	at := filepath.Join(dir, "at.yaml")
	require.NoError(t, os.WriteFile(at, comments(MaxFileSize), 0o600))
	_, err = Load(at)
	require.NoError(t, err)

	// An endless file is read only up to the limit, not into memory.
	if _, serr := os.Stat("/dev/zero"); serr == nil {
		data, err := ReadFile("/dev/zero")
		require.ErrorIs(t, err, ErrTooLarge)
		require.Nil(t, data)
	}
}

// TestTenantsConfig: tenants and defaults.tenant load (a named tenant
// without a weight takes the default's: configx.TestFair), and bad values
// name their field.
func TestTenantsConfig(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte(`
defaults: {tenant: {weight: 2, concurrency: 7}}
tenants:
  acme: {weight: 3}
  trial: {concurrency: 5}
`), "t.yaml")
	require.NoError(t, err)
	require.Equal(t, Tenant{Weight: 2, Concurrency: 7}, c.Defaults.Tenant)
	require.Equal(t, Tenant{Weight: 3}, c.Tenants["acme"])
	require.Equal(t, Tenant{Concurrency: 5}, c.Tenants["trial"])
	for _, tc := range []struct{ yaml, field string }{
		{`tenants: {acme: {weight: -1}}`, "tenants.acme.weight"},
		{`tenants: {acme: {weight: 1001}}`, "tenants.acme.weight"},
		{`tenants: {acme: {concurrency: -1}}`, "tenants.acme.concurrency"},
		{`defaults: {tenant: {weight: 0}}`, "defaults.tenant.weight"},
		// Written in the file, 0 is taken literally (and refused), not
		// read as "take defaults.tenant.weight" as an absent weight is.
		{`tenants: {acme: {weight: 0}}`, "tenants.acme.weight: must be greater than 0"},
		{`tenants: {acme: {wieght: 1}}`, "tenants.acme.wieght"},
		{"tenants: {\"a\\tb\": {weight: 1}}", "tenants.a\tb"},
		// #35 item 11: invisible characters make look-alike tenants.
		{"tenants: {\"acme\\u200b\": {weight: 1}}", "format character (U+200B"},
		{"tenants: {\"\\ufeffacme\": {weight: 1}}", "format character (U+FEFF"},
		{"tenants: {\"acme\\u2028\": {weight: 1}}", "separator (U+2028"},
		{"tenants: {\"acme corp\": {weight: 1}}", "tenants.acme corp: invalid tenant name"},
		{"agents: {tool: {exec: {command: [x]}}}\nschedules: {s: {cron: '@daily', agent: tool, tenant: \"acme\\u200b\"}}", `schedules.s.tenant: invalid task envelope: field "tenant" contains a format character (U+200B`},
	} {
		_, err := Parse([]byte(tc.yaml), "t.yaml")
		require.Error(t, err, tc.yaml)
		require.Contains(t, err.Error(), tc.field, tc.yaml)
	}
}
