package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/resilience"
	"github.com/agentq/agentq/tasks"
	"github.com/agentq/agentq/worker"
)

// exampleRedis starts an in-memory Redis for an example (use a real one in
// production) and returns a client on it and a function that stops both.
func exampleRedis() (redis.UniversalClient, func()) {
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	return rdb, func() { _ = rdb.Close(); mr.Close() }
}

// exampleOptions serve the worker's ops endpoints on a free loopback port
// and drop its logs, for an example's output.
func exampleOptions() []worker.Option {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	return []worker.Option{worker.WithListener(ln), worker.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}
}

// waitEnded polls task id's record until it is in a terminal state.
func waitEnded(ctx context.Context, client *tasks.Client, id string) *tasks.View {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if v, err := client.Store().Get(ctx, id); err == nil && v.State.Terminal() {
			return v
		}
	}
	panic("task " + id + " did not end")
}

func Example() {
	rdb, stop := exampleRedis()
	defer stop()

	// An agent written in Go, registered under its name. Its settings
	// (timeout, retries, breaker) are the config's block for "greeter", or
	// the defaults.
	greet := agent.Func(func(ctx context.Context, req agent.Request) (json.RawMessage, error) {
		var p struct{ Name string }
		if err := json.Unmarshal(req.Params, &p); err != nil {
			return nil, err
		}
		return json.Marshal(map[string]string{"greeting": "hello, " + p.Name})
	})
	w, err := worker.New(config.Default(), rdb, append(exampleOptions(), worker.WithAgent("greeter", greet))...)
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()

	client := tasks.NewClient(rdb)
	if _, err := client.Enqueue(ctx, tasks.Task{ID: "hi", Agent: "greeter", Params: json.RawMessage(`{"name":"Ada"}`)}); err != nil {
		panic(err)
	}
	v := waitEnded(ctx, client, "hi")
	fmt.Println(v.State, v.Attempts, string(v.Result))

	cancel() // a graceful shutdown
	fmt.Println("stopped:", <-done)
	// Output:
	// succeeded 1 {"greeting":"hello, Ada"}
	// stopped: <nil>
}

func ExampleWithAgent_deadLetter() {
	rdb, stop := exampleRedis()
	defer stop()

	// A failure the classifier says retrying cannot fix (here the agent
	// names the class itself) dead-letters the task at once.
	tooLong := agent.Func(func(context.Context, agent.Request) (json.RawMessage, error) {
		return nil, &resilience.Failure{Status: 400, Text: "prompt is too long", Class: resilience.ContextLength}
	})
	w, err := worker.New(config.Default(), rdb, append(exampleOptions(), worker.WithAgent("llm", tooLong))...)
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() { cancel(); <-done }()

	client := tasks.NewClient(rdb)
	if _, err := client.Enqueue(ctx, tasks.Task{ID: "big", Agent: "llm"}); err != nil {
		panic(err)
	}
	v := waitEnded(ctx, client, "big")
	fmt.Println(v.State, v.ErrorClass, v.Attempts)

	e, err := deadletter.NewStore(rdb).Get(ctx, "big")
	if err != nil {
		panic(err)
	}
	fmt.Println(e.Agent, e.ErrorClass, e.Reason)
	// Output:
	// dead_lettered context_length 1
	// llm context_length not_retryable
}

func ExampleWorker_Agents() {
	rdb, stop := exampleRedis()
	defer stop()
	cfg, err := config.Parse([]byte(`
agents:
  summarizer:
    exec: {command: [python3, summarize.py]}
  llm:
    http: {url: "https://llm.example/v1/chat/completions"}
`), "agentq.yaml")
	if err != nil {
		panic(err)
	}
	noop := agent.Func(func(context.Context, agent.Request) (json.RawMessage, error) { return nil, nil })
	// The config's agents and the Go functions registered in code.
	w, err := worker.New(cfg, rdb, append(exampleOptions(), worker.WithAgent("in_process", noop))...)
	if err != nil {
		panic(err)
	}
	fmt.Println(w.Agents())

	// An agent with neither a command, a URL nor a Go function is refused.
	_, err = worker.New(config.Default(), rdb, worker.WithAgent("nil_agent", nil))
	fmt.Println(err != nil)
	// Output:
	// [in_process llm summarizer]
	// true
}
