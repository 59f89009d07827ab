package config

import (
	"strings"
	"testing"

	"github.com/agentq/agentq/tasks"
)

// TestScheduleErrors: each bad schedule is an error naming its field.
func TestScheduleErrors(t *testing.T) {
	t.Parallel()
	const agents = "agents:\n  tool: {}\n"
	tests := []struct {
		name  string
		yaml  string
		line  int
		field string
		want  string
	}{
		{"bad cron", agents + "schedules:\n  s: {cron: '61 * * * *', agent: tool}\n", 4, "schedules.s.cron", "invalid schedule"},
		{"no cron", agents + "schedules:\n  s: {agent: tool}\n", 4, "schedules.s.cron", "must be set"},
		{"bad every", agents + "schedules:\n  s: {cron: '@every 10ms', agent: tool}\n", 4, "schedules.s.cron", "whole seconds"},
		{"unknown timezone", agents + "schedules:\n  s:\n    cron: '@daily'\n    agent: tool\n    timezone: Europe/Pariss\n", 7, "schedules.s.timezone", `unknown timezone "Europe/Pariss"`},
		{"unknown agent", agents + "schedules:\n  s:\n    cron: '@daily'\n    agent: toll\n", 6, "schedules.s.agent", `unknown agent "toll"`},
		{"no agent", agents + "schedules:\n  s: {cron: '@daily'}\n", 4, "schedules.s.agent", "must name an agent"},
		{"overlap", agents + "schedules:\n  s:\n    cron: '@daily'\n    agent: tool\n    overlap: queue\n", 7, "schedules.s.overlap", "allow or skip"},
		{"params list", agents + "schedules:\n  s:\n    cron: '@daily'\n    agent: tool\n    params: [1]\n", 7, "schedules.s.params", "must be a mapping"},
		{"params not json", agents + "schedules:\n  s:\n    cron: '@daily'\n    agent: tool\n    params: 'x='\n", 7, "schedules.s.params", "not JSON"},
		{"unserved queue", agents + "schedules:\n  s:\n    cron: '@daily'\n    agent: tool\n    queue: nightly\n", 7, "schedules.s.queue", "worker.queues"},
		{"tenant too long", agents + "schedules:\n  s:\n    cron: '@daily'\n    agent: tool\n    tenant: " + strings.Repeat("t", tasks.MaxTenantLen+1) + "\n", 7, "schedules.s.tenant", "at most"},
		{"bad name", agents + "schedules:\n  'a:b': {cron: '@daily', agent: tool}\n", 4, "schedules.a:b", "invalid schedule name"},
		{"unknown field", agents + "schedules:\n  s: {cron: '@daily', agent: tool, overlaps: skip}\n", 4, "schedules.s.overlaps", "did you mean overlap?"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			requireFieldError(t, tt.yaml, tt.line, tt.field, tt.want)
		})
	}
}
