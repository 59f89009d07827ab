package config

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/agentq/agentq/internal/webhook"
)

// Seed values of a webhook's fields.
const (
	DefaultWebhookTimeout = webhook.DefaultTimeout
	DefaultWebhookMaxAge  = webhook.DefaultMaxAge
	// DefaultWebhookConcurrency is webhooks.NAME.concurrency's.
	DefaultWebhookConcurrency = webhook.DefaultHookConcurrency
)

// Webhook is an endpoint that tasks may notify of their events (a task
// names it in its notify list, or its agent in agents.NAME.notify).
// Deliveries follow the Standard Webhooks specification (package webhook).
type Webhook struct {
	// URL is the absolute http:// or https:// URL deliveries are POSTed to.
	// It is never logged whole. Required.
	URL string `yaml:"url"`
	// Secret is the Standard Webhooks signing secret (whsec_ and base64),
	// written as ${VAR}: read from the worker's environment at start, never
	// logged. Required.
	Secret string `yaml:"secret"`
	// Events are the events the webhook is told of: succeeded,
	// dead_lettered, canceled, retrying, restarting, deferred, requeued,
	// interrupted, failed. Zero → [succeeded, dead_lettered, canceled].
	Events []string `yaml:"events"`
	// Timeout bounds one delivery attempt. Zero → 10s.
	Timeout time.Duration `yaml:"timeout"`
	// MaxAge is how long a failing delivery is retried (exponential
	// backoff with jitter, at most 5m apart) before it is given up (and
	// kept visible in `inspector webhooks`) (YAML max_age). Zero → 24h.
	MaxAge time.Duration `yaml:"max_age"`
	// Concurrency is the most deliveries to it a worker makes at once, of
	// the worker's pool of webhook.DefaultConcurrency (so a receiver that
	// hangs holds that many slots, and the other webhooks keep the rest).
	// 1 to webhook.MaxHookConcurrency. Zero → 8.
	Concurrency int `yaml:"concurrency"`
}

// webhookNameRE: a webhook name goes in a task's notify list (comma
// separated in its record) and in Redis fields.
var webhookNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// secretRefRE is a secret written as one ${VAR}.
var secretRefRE = regexp.MustCompile(`^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$`)

// WebhookNames lists the configured webhooks, sorted.
func (c *Config) WebhookNames() []string {
	out := make([]string, 0, len(c.Webhooks))
	for n := range c.Webhooks {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Webhook returns the webhook name with its defaults applied.
func (c *Config) Webhook(name string) (Webhook, bool) {
	w, ok := c.Webhooks[name]
	if !ok {
		return Webhook{}, false
	}
	w.Events = slices.Clone(w.Events)
	if len(w.Events) == 0 {
		w.Events = slices.Clone(webhook.DefaultEvents)
	}
	if w.Timeout == 0 {
		w.Timeout = DefaultWebhookTimeout
	}
	if w.MaxAge == 0 {
		w.MaxAge = DefaultWebhookMaxAge
	}
	if w.Concurrency == 0 {
		w.Concurrency = DefaultWebhookConcurrency
	}
	return w, true
}

// CheckNotify checks the webhook names a task notifies: each must be a
// configured webhook (so only configured URLs are ever called). The error
// names the first unknown one.
func (c *Config) CheckNotify(names []string) error {
	for _, n := range names {
		if _, ok := c.Webhooks[n]; !ok {
			return fmt.Errorf("unknown webhook %q: notify must name webhooks of the config%s", n, suggest(n, c.WebhookNames()))
		}
	}
	return nil
}

// Notify is the notify list of a task of agent enqueued with notify: the
// agent's agents.NAME.notify, then the task's own names, without repeats.
func (c *Config) Notify(agent string, notify []string) []string {
	var out []string
	for _, n := range append(slices.Clone(c.Agents[agent].Notify), notify...) {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// ResolveNotify is the notify list of a task of agent that names notify:
// notify checked (CheckNotify), after the agent's own (Notify).
func (c *Config) ResolveNotify(agent string, notify []string) ([]string, error) {
	if err := c.CheckNotify(notify); err != nil {
		return nil, err
	}
	return c.Notify(agent, notify), nil
}

// WebhookKeys resolves the configured webhooks' signing keys, by webhook
// name: each secret read from getenv (os.Getenv when nil) and decoded. An
// error names the field (never the secret's value).
func (c *Config) WebhookKeys(getenv func(string) string) (map[string][]byte, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	out := map[string][]byte{}
	for _, name := range c.WebhookNames() {
		w, _ := c.Webhook(name)
		path := join("webhooks", name) + ".secret"
		m := secretRefRE.FindStringSubmatch(w.Secret)
		if m == nil {
			return nil, fmt.Errorf("%s: must be ${VAR}", path)
		}
		v := getenv(m[1])
		if v == "" {
			return nil, fmt.Errorf("%s: the environment variable %s is not set", path, m[1])
		}
		key, err := webhook.ParseSecret(v)
		if err != nil {
			return nil, fmt.Errorf("%s (from %s): %w", path, m[1], err)
		}
		out[name] = key
	}
	return out, nil
}

// webhooks validates the webhooks block and the agents' notify lists.
func (v *validator) webhooks() {
	for _, name := range v.c.WebhookNames() {
		w := v.c.Webhooks[name]
		path := join("webhooks", name)
		if !webhookNameRE.MatchString(name) {
			v.fail(path, "invalid webhook name: want 1 to 64 of A-Z a-z 0-9 _ . -")
		}
		v.httpURL(path+".url", w.URL)
		switch {
		case w.Secret == "":
			v.fail(path+".secret", "must be set, as ${VAR} (a whsec_ secret in the environment)")
		case !secretRefRE.MatchString(w.Secret):
			// The value is not echoed: it may be the secret itself.
			v.fail(path+".secret", "must be ${VAR}: keep the secret in the environment, not in the file")
		}
		seen := map[string]bool{}
		for i, e := range w.Events {
			p := fmt.Sprintf("%s.events[%d]", path, i)
			if _, ok := webhook.Events[e]; !ok {
				v.fail(p, "unknown event %q: want one of %s", e, strings.Join(webhook.EventNames(), ", "))
			} else if seen[e] {
				v.fail(p, "%q is listed more than once", e)
			}
			seen[e] = true
		}
		if w.Timeout < 0 {
			v.fail(path+".timeout", "must not be negative, got %s", w.Timeout)
		}
		if w.MaxAge < 0 {
			v.fail(path+".max_age", "must not be negative, got %s", w.MaxAge)
		}
		if w.Concurrency < 0 || w.Concurrency > webhook.MaxHookConcurrency {
			v.fail(path+".concurrency", "must be 1 to %d (half a worker's pool of %d deliveries), or 0 for %d; got %d",
				webhook.MaxHookConcurrency, webhook.DefaultConcurrency, DefaultWebhookConcurrency, w.Concurrency)
		}
	}
	for _, name := range v.c.AgentNames() {
		for i, n := range v.c.Agents[name].Notify {
			if _, ok := v.c.Webhooks[n]; !ok {
				v.fail(fmt.Sprintf("%s.notify[%d]", join("agents", name), i), "unknown webhook %q: notify must name webhooks of the config%s",
					n, suggest(n, v.c.WebhookNames()))
			}
		}
	}
}
