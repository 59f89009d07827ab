package config

import (
	"encoding/json"
	"regexp"
	"sort"

	"github.com/agentq/agentq/internal/schedule"
	"github.com/agentq/agentq/tasks"
)

// Schedule is a task enqueued on a schedule (schedules.NAME). Every worker
// runs the fleet's schedules, and each tick is enqueued once however many
// workers run (package schedule).
type Schedule struct {
	// Cron is when it fires: a cron expression of 5 fields (minute hour
	// day-of-month month day-of-week) or 6 (seconds first), a descriptor
	// (@yearly, @monthly, @weekly, @daily, @hourly) or "@every D" (whole
	// seconds, ticks at multiples of D since the Unix epoch). Required.
	Cron string `yaml:"cron"`
	// Timezone is the IANA zone the cron expression reads in
	// (Europe/Paris). Zero → UTC.
	Timezone string `yaml:"timezone"`
	// Agent is the agent of the tasks, one of the config's agents. Required.
	Agent string `yaml:"agent"`
	// Action is the tasks' action. Zero → "".
	Action string `yaml:"action"`
	// Params are the tasks' params: a YAML mapping (or a string holding a
	// JSON object). Zero → none.
	Params Params `yaml:"params"`
	// Queue is the queue the tasks go to; it must be one of worker.queues.
	// Zero → "default".
	Queue string `yaml:"queue"`
	// Tenant is the tasks' tenant (tasks.Task.Tenant: fair dispatch across
	// a queue's tenants). Zero → the default tenant.
	Tenant string `yaml:"tenant"`
	// Overlap is "allow" (fire every tick) or "skip" (skip a tick while
	// the task of the last fired tick has not ended). Zero → allow.
	Overlap string `yaml:"overlap"`
}

// Params is a JSON object written in the file as a YAML mapping.
type Params = json.RawMessage

// scheduleNameRE: a schedule name goes in task IDs and Redis keys.
var scheduleNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// ScheduleNames lists the configured schedules, sorted.
func (c *Config) ScheduleNames() []string {
	out := make([]string, 0, len(c.Schedules))
	for n := range c.Schedules {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// schedules validates the schedules block.
func (v *validator) schedules() {
	for _, name := range v.c.ScheduleNames() {
		s := v.c.Schedules[name]
		path := join("schedules", name)
		if !scheduleNameRE.MatchString(name) {
			v.fail(path, "invalid schedule name: want 1 to 64 of A-Z a-z 0-9 _ . -")
		}
		if s.Cron == "" {
			v.fail(path+".cron", "must be set: a cron expression, a descriptor such as @daily, or @every D")
		}
		if _, err := schedule.LoadZone(s.Timezone); err != nil {
			v.fail(path+".timezone", "unknown timezone %q: want an IANA name such as Europe/Paris", s.Timezone)
		} else if s.Cron != "" {
			if _, err := schedule.ParseSpec(s.Cron, s.Timezone); err != nil {
				v.fail(path+".cron", "%v", err)
			}
		}
		if s.Agent == "" {
			v.fail(path+".agent", "must name an agent of the config")
		} else if _, ok := v.c.Agents[s.Agent]; !ok {
			v.fail(path+".agent", "unknown agent %q: must be an agent of the config%s", s.Agent, suggest(s.Agent, v.c.AgentNames()))
		}
		if len(s.Params) > 0 {
			var obj map[string]any
			if err := json.Unmarshal(s.Params, &obj); err != nil || obj == nil {
				v.fail(path+".params", "must be a mapping (a JSON object)")
			}
		}
		if s.Queue != "" {
			if _, ok := v.c.Worker.Queues[s.Queue]; !ok {
				v.fail(path+".queue", "queue %q is not one of worker.queues: no worker would run its tasks", s.Queue)
			}
		}
		if err := tasks.CheckText("action", s.Action); err != nil {
			v.fail(path+".action", "%v", err)
		}
		if err := tasks.CheckTenant(s.Tenant); err != nil {
			v.fail(path+".tenant", "%v", err)
		}
		switch s.Overlap {
		case "", schedule.OverlapAllow, schedule.OverlapSkip:
		default:
			v.fail(path+".overlap", "must be allow or skip, got %q", s.Overlap)
		}
	}
}
