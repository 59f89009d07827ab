package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/resilience"
)

// TestFallbackAndHealthErrors: bad fallback lists and health probes are
// errors naming file, line and field.
func TestFallbackAndHealthErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		yaml  string
		line  int
		field string
		want  string
	}{
		{"unknown fallback", "agents:\n  a:\n    fallback: [b, c]\n  b: {}\n", 3, "agents.a.fallback[1]", `unknown agent "c": a fallback must be a configured agent`},
		{"unknown fallback suggests", "agents:\n  llm:\n    fallback: [backpu]\n  backup: {}\n", 3, "agents.llm.fallback[0]", "did you mean backup?"},
		{"self fallback", "agents:\n  a:\n    fallback:\n      - a\n", 4, "agents.a.fallback[0]", "cannot be its own fallback"},
		{"duplicate fallback", "agents:\n  a:\n    fallback: [b, b]\n  b: {}\n", 3, "agents.a.fallback[1]", `"b" is listed more than once`},
		{"two-agent cycle", "agents:\n  a:\n    fallback: [b]\n  b:\n    fallback: [a]\n", 5, "agents.b.fallback[0]", "fallback cycle: a → b → a"},
		{"three-agent cycle", "agents:\n  a:\n    fallback: [b]\n  b:\n    fallback: [c]\n  c:\n    fallback: [x, a]\n  x: {}\n", 7, "agents.c.fallback[1]", "fallback cycle: a → b → c → a"},
		{"fallback not a list", "agents:\n  a:\n    fallback: b\n", 3, "agents.a.fallback", "must be a list"},
		{"class fallback not bool", "defaults:\n  classes:\n    timeout: {fallback: maybe}\n", 3, "defaults.classes.timeout.fallback", "must be true or false"},
		{"health url and command", "agents:\n  a:\n    health:\n      url: http://127.0.0.1/h\n      command: [ping]\n", 3, "agents.a.health", "has both url and command"},
		{"health neither", "agents:\n  a:\n    health: {interval: 1s}\n", 3, "agents.a.health", "must set url or command"},
		{"health zero interval", "agents:\n  a:\n    health:\n      url: http://127.0.0.1/h\n      interval: 0s\n", 5, "agents.a.health.interval", "must be a positive duration"},
		{"health negative timeout", "agents:\n  a:\n    health:\n      command: [ping]\n      timeout: -1s\n", 5, "agents.a.health.timeout", "positive"},
		{"health bad url", "agents:\n  a:\n    health:\n      url: /healthz\n", 4, "agents.a.health.url", "absolute http"},
		{"health blank program", "agents:\n  a:\n    health:\n      command: ['']\n", 4, "agents.a.health.command[0]", "must not be empty"},
		{"health bad status", "agents:\n  a:\n    health:\n      url: http://x/h\n      expect_status: 42\n", 5, "agents.a.health.expect_status", "100..599"},
		{"health status for command", "agents:\n  a:\n    health:\n      command: [ping]\n      expect_status: 204\n", 5, "agents.a.health.expect_status", "url probes only"},
		{"health unknown field", "agents:\n  a:\n    health:\n      url: http://x/h\n      intervall: 1s\n", 5, "agents.a.health.intervall", "did you mean interval?"},
		{"health in defaults", "defaults:\n  health: {url: 'http://x/h'}\n", 2, "defaults.health", "unknown field"},
		{"fallback in defaults", "defaults:\n  fallback: [a]\n", 2, "defaults.fallback", "unknown field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			requireFieldError(t, tt.yaml, tt.line, tt.field, tt.want)
		})
	}
}

// TestFallbackAndHealthParsed: the fields are decoded, probe defaults fill
// what the file leaves out, and a chain without cycles is valid.
func TestFallbackAndHealthParsed(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte(`
defaults:
  classes:
    timeout: {fallback: true}
agents:
  llm:
    http: {url: 'https://llm.example/v1'}
    fallback: [backup, local]
    health: {url: 'https://llm.example/healthz', expect_status: 204}
    classes:
      quota_exhausted: {fallback: false}
  backup:
    http: {url: 'https://backup.example/v1'}
    fallback: [local]
  local:
    exec: {command: [./local-llm], env: [PATH]}
    health: {command: [./local-llm, --ping], interval: 10s, timeout: 2s}
`), "agentq.yaml")
	require.NoError(t, err)
	llm, ok := c.Agent("llm")
	require.True(t, ok)
	require.Equal(t, []string{"backup", "local"}, llm.Fallback)
	require.Equal(t, &HealthProbe{URL: "https://llm.example/healthz", Interval: DefaultProbeInterval,
		Timeout: DefaultProbeTimeout, ExpectStatus: 204}, llm.Health)
	require.False(t, *llm.Classes[resilience.QuotaExhausted].Fallback)
	require.True(t, *llm.Classes[resilience.Timeout].Fallback, "inherited from defaults")
	local, _ := c.Agent("local")
	require.Empty(t, local.Fallback)
	require.Equal(t, []string{"./local-llm", "--ping"}, local.Health.Command)
	require.Equal(t, 10*time.Second, local.Health.Interval)
	require.Equal(t, 2*time.Second, local.Health.Timeout)

	// Agent returns copies: changing them leaves the config alone.
	llm.Fallback[0] = "x"
	llm.Health.URL = "y"
	again, _ := c.Agent("llm")
	require.Equal(t, "backup", again.Fallback[0])
	require.Equal(t, "https://llm.example/healthz", again.Health.URL)
	*again.Classes[resilience.Timeout].Fallback = false
	third, _ := c.Agent("llm")
	require.True(t, *third.Classes[resilience.Timeout].Fallback)
}

// TestAttemptLength (#11 item 2): a config can say timeout: 2h; a chain
// that could outlast the time asynq gives a run is refused, naming the
// agent's timeout.
func TestAttemptLength(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte("agents:\n  coder:\n    timeout: 2h\n"), "agentq.yaml")
	require.NoError(t, err)
	a, _ := c.Agent("coder")
	require.Equal(t, 2*time.Hour, a.Timeout)

	requireFieldError(t, "agents:\n  coder:\n    timeout: 30h\n", 3, "agents.coder.timeout", "more than the 23h59m0s a task run may take")
	requireFieldError(t, "agents:\n  a:\n    timeout: 20h\n    fallback: [b]\n  b:\n    timeout: 5h\n", 3, "agents.a.timeout",
		"an attempt may last 25h0m0s (timeout 20h0m0s plus its fallback chain)")
}
