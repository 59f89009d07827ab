package config

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestWebhooks: a webhooks block with its defaults, agents' notify, and
// the secrets read from the environment when resolved.
func TestWebhooks(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte(`
webhooks:
  billing: {url: "https://hooks.example/agentq?token=abc", secret: "${BILLING_SECRET}"}
  audit:
    url: http://127.0.0.1:9/x
    secret: ${AUDIT_SECRET}
    events: [succeeded, retrying, canceled]
    timeout: 3s
    max_age: 1h
    concurrency: 2
agents:
  llm:
    notify: [audit]
`), "agentq.yaml")
	require.NoError(t, err)
	b, ok := c.Webhook("billing")
	require.True(t, ok)
	require.Equal(t, []string{"succeeded", "dead_lettered", "canceled"}, b.Events)
	require.Equal(t, 10*time.Second, b.Timeout)
	require.Equal(t, 24*time.Hour, b.MaxAge)
	require.Equal(t, 8, b.Concurrency)
	a, _ := c.Webhook("audit")
	require.Equal(t, 3*time.Second, a.Timeout)
	require.Equal(t, 2, a.Concurrency)
	require.Equal(t, []string{"audit", "billing"}, c.Notify("llm", []string{"billing", "audit"}))
	require.Equal(t, []string{"billing"}, c.Notify("other", []string{"billing"}))
	require.NoError(t, c.CheckNotify([]string{"audit", "billing"}))
	require.ErrorContains(t, c.CheckNotify([]string{"audit", "bilings"}), `unknown webhook "bilings"`)

	key := []byte(strings.Repeat("k", 32))
	secret := "whsec_" + base64.StdEncoding.EncodeToString(key)
	env := map[string]string{"BILLING_SECRET": secret, "AUDIT_SECRET": secret}
	keys, err := c.WebhookKeys(func(k string) string { return env[k] })
	require.NoError(t, err)
	require.Equal(t, map[string][]byte{"billing": key, "audit": key}, keys)

	env["AUDIT_SECRET"] = ""
	_, err = c.WebhookKeys(func(k string) string { return env[k] })
	require.ErrorContains(t, err, "webhooks.audit.secret: the environment variable AUDIT_SECRET is not set")
	env["AUDIT_SECRET"] = "whsec_not base64 SECRETVALUE"
	_, err = c.WebhookKeys(func(k string) string { return env[k] })
	require.ErrorContains(t, err, "webhooks.audit.secret")
	require.NotContains(t, err.Error(), "SECRETVALUE", "the secret is never in an error")
}

// TestWebhookErrors: bad webhooks blocks are errors naming file, line and
// field (and never echoing a secret).
func TestWebhookErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		yaml  string
		line  int
		field string
		want  string
	}{
		{"no url", "webhooks:\n  h: {secret: '${S}'}\n", 2, "webhooks.h.url", "must not be empty"},
		{"bad url", "webhooks:\n  h: {url: 'ftp://x/y', secret: '${S}'}\n", 2, "webhooks.h.url", "http:// or https://"},
		{"no secret", "webhooks:\n  h: {url: 'https://x/y'}\n", 2, "webhooks.h.secret", "must be set"},
		{"literal secret", "webhooks:\n  h:\n    url: https://x/y\n    secret: whsec_c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0\n", 4, "webhooks.h.secret", "keep the secret in the environment"},
		{"unknown event", "webhooks:\n  h:\n    url: https://x/y\n    secret: ${S}\n    events: [succeeded, finished]\n", 5, "webhooks.h.events[1]", `unknown event "finished"`},
		{"task_canceled is canceled", "webhooks:\n  h:\n    url: https://x/y\n    secret: ${S}\n    events: [task_canceled]\n", 5, "webhooks.h.events[0]", "canceled"},
		{"repeated event", "webhooks:\n  h:\n    url: https://x/y\n    secret: ${S}\n    events: [succeeded, succeeded]\n", 5, "webhooks.h.events[1]", "more than once"},
		{"negative timeout", "webhooks:\n  h:\n    url: https://x/y\n    secret: ${S}\n    timeout: -1s\n", 5, "webhooks.h.timeout", "negative"},
		{"negative max_age", "webhooks:\n  h:\n    url: https://x/y\n    secret: ${S}\n    max_age: -1h\n", 5, "webhooks.h.max_age", "negative"},
		{"negative concurrency", "webhooks:\n  h:\n    url: https://x/y\n    secret: ${S}\n    concurrency: -1\n", 5, "webhooks.h.concurrency", "must be 1 to 32"},
		{"concurrency past half the pool", "webhooks:\n  h:\n    url: https://x/y\n    secret: ${S}\n    concurrency: 33\n", 5, "webhooks.h.concurrency", "got 33"},
		{"bad name", "webhooks:\n  'a,b': {url: 'https://x/y', secret: '${S}'}\n", 2, "webhooks.a,b", "invalid webhook name"},
		{"unknown field", "webhooks:\n  h: {url: 'https://x/y', secret: '${S}', max_ages: 1h}\n", 2, "webhooks.h.max_ages", "did you mean max_age?"},
		{"agent notifies an unknown webhook", "webhooks:\n  h: {url: 'https://x/y', secret: '${S}'}\nagents:\n  a:\n    notify: [h, hh]\n", 5, "agents.a.notify[1]", `unknown webhook "hh"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			requireFieldError(t, tt.yaml, tt.line, tt.field, tt.want)
		})
	}
}
