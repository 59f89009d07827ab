package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLimitsErrors: bad limits blocks are errors naming file, line and field.
func TestLimitsErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		yaml  string
		line  int
		field string
		want  string
	}{
		{"per required with requests", "agents:\n  a:\n    limits: {requests: 20}\n", 3, "agents.a.limits.per", "is required with requests or tokens"},
		{"per required with tokens", "agents:\n  a:\n    limits:\n      tokens: 1000\n", 3, "agents.a.limits.per", "is required"},
		{"negative per", "agents:\n  a:\n    limits:\n      requests: 2\n      per: -1s\n", 5, "agents.a.limits.per", "must be positive"},
		{"negative requests", "agents:\n  a:\n    limits:\n      requests: -1\n      per: 1s\n", 4, "agents.a.limits.requests", "must not be negative"},
		{"negative tokens", "agents:\n  a:\n    limits:\n      tokens: -5\n      per: 1s\n", 4, "agents.a.limits.tokens", "must not be negative"},
		{"negative concurrency", "agents:\n  a:\n    limits:\n      concurrency: -1\n", 4, "agents.a.limits.concurrency", "must not be negative"},
		{"no limit", "agents:\n  a:\n    limits: {per: 1s}\n", 3, "agents.a.limits", "sets no limit"},
		{"bad key", "agents:\n  a:\n    limits: {key: 'a b', concurrency: 1}\n", 3, "agents.a.limits.key", "whitespace"},
		{"unknown field", "agents:\n  a:\n    limits:\n      concurency: 1\n", 4, "agents.a.limits.concurency", "did you mean concurrency?"},
		{"per not a duration", "agents:\n  a:\n    limits: {requests: 1, per: minute}\n", 3, "agents.a.limits.per", "duration"},
		{"shared key, different numbers", "agents:\n  a:\n    limits: {key: k, requests: 20, per: 1s}\n  b:\n    limits: {key: k, requests: 30, per: 1s}\n",
			5, "agents.b.limits.requests", `agent "a" shares limits key "k"`},
		{"shared breaker key, different concurrency", "agents:\n  a:\n    breaker_key: p\n    limits: {concurrency: 2}\n  b:\n    breaker_key: p\n    limits: {concurrency: 3}\n",
			7, "agents.b.limits.concurrency", `shares limits key "p"`},
		{"limits in defaults", "defaults:\n  limits: {concurrency: 1}\n", 2, "defaults.limits", "unknown field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			requireFieldError(t, tt.yaml, tt.line, tt.field, tt.want)
		})
	}
}

// TestLimitsParsed: the block is decoded, its key defaults to the breaker
// key, and agents sharing a key with the same numbers are valid.
func TestLimitsParsed(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte(`
agents:
  llm:
    breaker_key: openai
    limits: {requests: 500, tokens: 200000, per: 1m, concurrency: 20}
  llm2:
    limits: {key: openai, requests: 500, tokens: 200000, per: 1m, concurrency: 20}
  tool:
    limits: {concurrency: 2}
  free: {}
`), "t.yaml")
	require.NoError(t, err)
	require.NoError(t, c.Validate())
	a, _ := c.Agent("llm")
	require.Equal(t, &Limits{Key: "openai", Requests: 500, Tokens: 200000, Per: time.Minute, Concurrency: 20}, a.Limits)
	b, _ := c.Agent("llm2")
	require.Equal(t, "openai", b.Limits.Key)
	tool, _ := c.Agent("tool")
	require.Equal(t, &Limits{Key: "tool", Concurrency: 2}, tool.Limits)
	free, _ := c.Agent("free")
	require.Nil(t, free.Limits)
	a.Limits.Requests = 1
	again, _ := c.Agent("llm")
	require.Equal(t, 500, again.Limits.Requests, "Agent returns a copy")
}
