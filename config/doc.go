// Package config loads, resolves and validates agentq's YAML configuration
// (DESIGN.md §3 "Configuration").
//
// A file looks like this (every field is optional):
//
//	redis:
//	  url: redis://127.0.0.1:6379/0        # AGENTQ_REDIS_URL overrides; rediss:// for TLS
//	worker:
//	  concurrency: 20
//	  shutdown_timeout: 30s
//	  http_addr: 127.0.0.1:9090
//	  queues: {default: 1}
//	  poll_interval: 1s
//	  forward_interval: 50ms
//	defaults:
//	  timeout: 30s
//	  retry:           {max_attempts: 3, initial_backoff: 500ms, max_backoff: 5s, jitter: 0.2, max_retry_after: 60s}
//	  circuit_breaker: {mode: rate, window: 30s, failure_rate: 0.5, min_calls: 100, min_failing_tasks: 3, cooldown: 60s, max_cooldown: 10m, half_open_max_calls: 1}
//	  restart:         {max_restarts: 3, delays: [1m, 2m, 4m], max_pending: 10000}
//	  classes:         {rate_limited: {retry: true, breaker: true, exhausted: restart, fallback: true}}
//	agents:
//	  git_agent:
//	    exec: {command: ["./agents/git-agent", "--json"], env: [PATH, HOME]}
//	    timeout: 10s
//	  llm:
//	    http:
//	      url: https://llm.example/v1/chat/completions
//	      headers: {Authorization: "Bearer ${LLM_API_KEY}"}
//	    breaker_key: llm.example
//	    retry: {max_attempts: 5}
//	    fallback: [summarize]              # configured agents, in order; no cycles
//	    health: {url: https://llm.example/healthz, interval: 30s, timeout: 5s}
//	  summarize: {timeout: 2m}             # a Go-function agent registered in code
//	schedules:                           # each tick enqueued once, whatever the number of workers
//	  nightly: {cron: "30 1 * * *", timezone: Europe/Paris, agent: git_agent, action: status, overlap: skip}
//	history:
//	  retention: 168h
//	alerts: {threshold: 10, window: 5m, webhook_url: https://hooks.example/agentq}
//	classifier:                          # checked before the built-in classifier
//	  rules:
//	    - {name: team quota, class: quota_exhausted, status: 500, regexp: 'quota for team \w+ is gone'}
//
// # Resolution
//
// Fields the file leaves out take the seed values documented on each struct
// field (the DESIGN.md defaults). Each agent starts from the resolved
// defaults block and overrides it field by field: an agent's
// retry: {max_attempts: 5} keeps the default backoffs and jitter. Lists
// (delays, command, env) and the worker's queues map are replaced whole;
// classes are merged class by class and field by field. The result is a
// plain *Config: Config.Defaults and every Config.Agents entry are complete.
//
// An agent with neither exec nor http is allowed: its block carries the
// settings of a Go-function agent registered in code under the same name.
// Config.Agent returns the default settings for an agent the file does not
// name.
//
// Header values keep ${VAR} literally; runners expand them at request time
// with HTTP.ExpandHeaders so that secrets are never stored in a Config.
//
// # Values
//
// Durations are Go duration strings ("500ms", "30s", "1m"); a bare number is
// an error that asks for a unit. A value written in the file is taken
// literally: concurrency: 0 is an error, not "use the default".
//
// # Errors
//
// Every error wraps ErrInvalid and is made of *FieldError values that name
// the file, the line and the dotted field:
//
//	agentq.yaml:7: agents.llm.retri: unknown field (did you mean retry?)
//	agentq.yaml:12: agents.git_agent.retry.max_attempts: must be at least 1, got 0
//
// Unknown fields, wrong types, zero or negative durations, out-of-range
// numbers, max_backoff < initial_backoff, an empty delays list with
// max_restarts > 0, an agent with both exec and http, an unknown error class
// and more are reported together, in line order (errors.Join). An empty
// file is the default configuration; a file with several YAML documents is
// an error.
package config
