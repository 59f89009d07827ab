// Package configx turns the config's settings (package config, public)
// into the values of the internal packages that run them: fair
// dispatch's tenants (broker.FairConfig), the webhooks with their keys
// (webhook.Hook), the schedules (schedule.Def) and the prices
// (usage.Prices). config's API names only its own types; the worker, the
// delivery and the inspector convert here.
package configx

import (
	"fmt"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/schedule"
	"github.com/agentq/agentq/internal/usage"
	"github.com/agentq/agentq/internal/webhook"
	"github.com/agentq/agentq/tasks"
)

// Fair returns the tenants' settings as the fair dispatch reads them: a
// named tenant without a weight takes defaults.tenant's.
func Fair(c *config.Config) broker.FairConfig {
	fc := broker.FairConfig{Default: fairSettings(c.Defaults.Tenant)}
	if len(c.Tenants) > 0 {
		fc.Named = make(map[string]broker.TenantSettings, len(c.Tenants))
		for n, t := range c.Tenants {
			if t.Weight == 0 {
				t.Weight = c.Defaults.Tenant.Weight
			}
			fc.Named[n] = fairSettings(t)
		}
	}
	return fc
}

func fairSettings(t config.Tenant) broker.TenantSettings {
	return broker.TenantSettings{Weight: t.Weight, Concurrency: t.Concurrency}
}

// Prices returns the config's pricing as package usage prices it.
func Prices(c *config.Config) usage.Prices {
	ps := make(usage.Prices, len(c.Pricing))
	for model, p := range c.Pricing {
		ps[model] = usage.Price(p)
	}
	return ps
}

// Schedules are the configured schedules, sorted by name, for a
// schedule.Scheduler. The config must be valid.
func Schedules(c *config.Config) ([]schedule.Def, error) {
	out := make([]schedule.Def, 0, len(c.Schedules))
	for _, name := range c.ScheduleNames() {
		s := c.Schedules[name]
		sp, err := schedule.ParseSpec(s.Cron, s.Timezone)
		if err != nil {
			return nil, fmt.Errorf("schedules.%s.cron: %w", name, err)
		}
		out = append(out, schedule.Def{Name: name, Spec: sp, Overlap: s.Overlap,
			Task: tasks.Task{Agent: s.Agent, Action: s.Action, Params: s.Params, Queue: s.Queue, Tenant: s.Tenant}})
	}
	return out, nil
}

// Hooks resolves the configured webhooks for a deliverer: each secret read
// from getenv (os.Getenv when nil) and decoded (config.WebhookKeys). An
// error names the field (never the secret's value).
func Hooks(c *config.Config, getenv func(string) string) (map[string]webhook.Hook, error) {
	keys, err := c.WebhookKeys(getenv)
	if err != nil {
		return nil, err
	}
	out := make(map[string]webhook.Hook, len(keys))
	for name, key := range keys {
		w, _ := c.Webhook(name)
		out[name] = webhook.Hook{Name: name, URL: w.URL, Key: key, Events: w.Events, Timeout: w.Timeout, MaxAge: w.MaxAge,
			Concurrency: w.Concurrency}
	}
	return out, nil
}
