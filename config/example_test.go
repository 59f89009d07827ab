package config_test

import (
	"errors"
	"fmt"

	"github.com/agentq/agentq/config"
)

func Example() {
	cfg, err := config.Parse([]byte(`
defaults:
  timeout: 30s
agents:
  llm:
    http: {url: "https://llm.example/v1/chat/completions"}
    retry: {max_attempts: 5}
`), "agentq.yaml")
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg.ApplyEnv(func(string) string { return "redis://10.0.0.5:6379/0" })
	llm, _ := cfg.Agent("llm")
	fmt.Println(cfg.Redis.URL)
	fmt.Println(llm.Retry.MaxAttempts, llm.Retry.InitialBackoff, llm.Retry.MaxBackoff, llm.BreakerKey)
	// Output:
	// redis://10.0.0.5:6379/0
	// 5 500ms 5s llm
}

func ExampleParse_error() {
	_, err := config.Parse([]byte(`
agents:
  llm:
    retri: {max_attempts: 5}
`), "agentq.yaml")
	fmt.Println(err)
	fmt.Println(errors.Is(err, config.ErrInvalid))
	// Output:
	// agentq.yaml:4: agents.llm.retri: unknown field (did you mean retry?)
	// true
}
