package config_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/agentq/agentq/config"
)

func ExampleLoad() {
	dir, err := os.MkdirTemp("", "agentq-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "agentq.yaml")
	if err := os.WriteFile(path, []byte(`
worker:
  concurrency: 8
  queues: {default: 3, bulk: 1}
agents:
  summarizer:
    exec: {command: [python3, summarize.py]}
    queue: bulk
    timeout: 2m
`), 0o600); err != nil {
		panic(err)
	}

	// Load reads, applies AGENTQ_REDIS_URL and validates.
	cfg, err := config.Load(path)
	if err != nil {
		panic(err)
	}
	s, _ := cfg.Agent("summarizer")
	fmt.Println(cfg.Worker.Concurrency, cfg.ServedQueues(), cfg.AgentNames())
	fmt.Println(s.Exec.Command, s.Timeout, cfg.AgentQueue("summarizer"), cfg.AgentQueue("other"))

	// A missing file is an error naming it.
	_, err = config.Load(filepath.Join(dir, "missing.yaml"))
	fmt.Println(errors.Is(err, os.ErrNotExist))
	// Output:
	// 8 [bulk default] [summarizer]
	// [python3 summarize.py] 2m0s bulk default
	// true
}

func ExampleConfig_Agent() {
	cfg, err := config.Parse([]byte(`
agents:
  gpt:
    http: {url: "https://llm.example/v1/chat/completions"}
    breaker_key: llm.example
    limits: {requests: 60, per: 1m}
  tool:
    exec: {command: [./tool]}
`), "agentq.yaml")
	if err != nil {
		panic(err)
	}
	// Every caller (worker, HTTP API, console, CLIs) reads an agent through
	// Agent, which applies the defaults that depend on other settings: the
	// breaker key is the agent's name unless set, the limits key the
	// breaker key unless set.
	for _, name := range []string{"gpt", "tool", "go_func"} {
		a, configured := cfg.Agent(name)
		limitsKey := "-"
		if a.Limits != nil {
			limitsKey = a.Limits.Key
		}
		fmt.Println(name, configured, a.BreakerKey, limitsKey, a.Timeout)
	}
	// Output:
	// gpt true llm.example llm.example 30s
	// tool true tool - 30s
	// go_func false go_func - 30s
}

func ExampleLease() {
	// A breaker's half-open trial and a limits slot taken for a call are
	// held until the call's timeout plus LeaseMargin at most.
	fmt.Println(config.Lease(30*time.Second), config.LeaseMargin)
	// Output:
	// 35s 5s
}
