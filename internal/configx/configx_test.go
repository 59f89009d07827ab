package configx

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/schedule"
	"github.com/agentq/agentq/internal/usage"
)

// TestFair: named tenants keep their settings, a named tenant without a
// weight takes defaults.tenant's (its cap stays its own), and others are
// labelled "other".
func TestFair(t *testing.T) {
	t.Parallel()
	c, err := config.Parse([]byte(`
defaults: {tenant: {weight: 2, concurrency: 7}}
tenants:
  acme: {weight: 3}
  trial: {concurrency: 5}
`), "t.yaml")
	require.NoError(t, err)
	fc := Fair(c)
	require.Equal(t, 2.0, fc.Default.Weight)
	require.Equal(t, 7, fc.Default.Concurrency)
	require.Equal(t, 3.0, fc.Named["acme"].Weight)
	require.Equal(t, 0, fc.Named["acme"].Concurrency, "a named tenant's cap is its own")
	require.Equal(t, 2.0, fc.Named["trial"].Weight, "a named tenant without a weight takes the default's")
	require.Equal(t, "other", fc.Label("somebody"))
	require.Equal(t, "acme", fc.Label("acme"))
	require.Equal(t, "default", fc.Label(""))
}

// TestPrices: the config's pricing prices usage, a dated model name at its
// base name's price.
func TestPrices(t *testing.T) {
	t.Parallel()
	c, err := config.Parse([]byte(`
pricing:
  gpt-4o: {input_per_mtok: 2.5, output_per_mtok: 10, cached_input_per_mtok: 1.25}
  claude-3-5-haiku: {input_per_mtok: 0.8, output_per_mtok: 4}
`), "p.yaml")
	require.NoError(t, err)
	ps := Prices(c)
	require.Equal(t, []string{"claude-3-5-haiku", "gpt-4o"}, ps.Names())
	require.Equal(t, 1.25, *ps["gpt-4o"].CachedInputPerMTok)
	require.Nil(t, ps["claude-3-5-haiku"].CachedInputPerMTok)
	name, _, ok := ps.Match("gpt-4o-2024-08-06")
	require.True(t, ok)
	require.Equal(t, "gpt-4o", name)
	u := ps.Price(usage.Usage{Model: "claude-3-5-haiku", InputTokens: 1_000_000, OutputTokens: 1_000_000})
	require.True(t, u.Priced)
	require.InDelta(t, 4.8, u.CostUSD, 1e-9)
}

// TestHooks: the webhooks' settings and their keys, read from the
// environment; an unset or bad secret is an error naming its field (the
// keys' own cases: config.TestWebhooks).
func TestHooks(t *testing.T) {
	t.Parallel()
	c, err := config.Parse([]byte(`
webhooks:
  billing: {url: "https://hooks.example/agentq", secret: "${BILLING_SECRET}"}
  audit:
    url: http://127.0.0.1:9/x
    secret: ${AUDIT_SECRET}
    events: [succeeded, retrying, canceled]
    timeout: 3s
    concurrency: 2
`), "agentq.yaml")
	require.NoError(t, err)
	key := []byte(strings.Repeat("k", 32))
	secret := "whsec_" + base64.StdEncoding.EncodeToString(key)
	env := map[string]string{"BILLING_SECRET": secret, "AUDIT_SECRET": secret}
	hooks, err := Hooks(c, func(k string) string { return env[k] })
	require.NoError(t, err)
	require.Len(t, hooks, 2)
	require.Equal(t, key, hooks["billing"].Key)
	require.Equal(t, "billing", hooks["billing"].Name)
	require.Equal(t, "https://hooks.example/agentq", hooks["billing"].URL)
	require.Equal(t, []string{"succeeded", "dead_lettered", "canceled"}, hooks["billing"].Events)
	require.Equal(t, []string{"succeeded", "retrying", "canceled"}, hooks["audit"].Events)
	require.Equal(t, 2, hooks["audit"].Concurrency)
	require.Equal(t, "3s", hooks["audit"].Timeout.String())

	env["AUDIT_SECRET"] = ""
	_, err = Hooks(c, func(k string) string { return env[k] })
	require.ErrorContains(t, err, "webhooks.audit.secret: the environment variable AUDIT_SECRET is not set")
}

// TestSchedules: a schedules block decodes, params as JSON, and becomes
// the scheduler's definitions.
func TestSchedules(t *testing.T) {
	t.Parallel()
	c, err := config.Parse([]byte(`
worker:
  queues: {default: 1, cron: 2}
agents:
  tool: {timeout: 5s}
schedules:
  nightly:
    cron: "30 2 * * *"
    timezone: Europe/Paris
    agent: tool
    action: report
    params: {repo: ".", depth: 2, tags: [a, b]}
    queue: cron
    tenant: acme
    overlap: skip
  fast: {cron: "@every 2s", agent: tool, params: '{"x": 1}'}
`), "agentq.yaml")
	require.NoError(t, err)
	require.Equal(t, []string{"fast", "nightly"}, c.ScheduleNames())
	defs, err := Schedules(c)
	require.NoError(t, err)
	require.Len(t, defs, 2)
	n := defs[1]
	require.Equal(t, "nightly", n.Name)
	require.Equal(t, "Europe/Paris", n.Spec.Location().String())
	require.Equal(t, schedule.OverlapSkip, n.Overlap)
	require.Equal(t, "acme", n.Task.Tenant)
	require.Equal(t, "cron", n.Task.Queue)
	require.Equal(t, "report", n.Task.Action)
	require.JSONEq(t, `{"repo": ".", "depth": 2, "tags": ["a", "b"]}`, string(n.Task.Params))
	require.JSONEq(t, `{"x": 1}`, string(defs[0].Task.Params))
	require.Equal(t, "UTC", defs[0].Spec.Location().String())
	require.Equal(t, "", defs[0].Overlap)
}
