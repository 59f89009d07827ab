package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/tasks"
	"github.com/agentq/agentq/worker"
)

// startWorker runs a worker of cfg with the Go agents given on rdb until
// the returned stop is called.
func startWorker(cfg *config.Config, rdb redis.UniversalClient, agents map[string]agent.Func) (stop func()) {
	opts := exampleOptions()
	for name, f := range agents {
		opts = append(opts, worker.WithAgent(name, f))
	}
	w, err := worker.New(cfg, rdb, opts...)
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			panic(err)
		}
	}
}

// parse reads an example's config.
func parse(yaml string) *config.Config {
	cfg, err := config.Parse([]byte(yaml), "agentq.yaml")
	if err != nil {
		panic(err)
	}
	return cfg
}

// echo is a Go agent that answers its params.
var echo = agent.Func(func(_ context.Context, req agent.Request) (json.RawMessage, error) {
	return req.Params, nil
})

// Example_tenants: the config gives tenants their share of a queue
// (weight) and a cap on their runs in flight; a producer names the tenant
// and the priority of each task, and the record keeps both.
func Example_tenants() {
	rdb, stop := exampleRedis()
	defer stop()
	cfg := parse(`
tenants:
  acme: {weight: 3, concurrency: 10}
  initech: {weight: 1}
`)
	defer startWorker(cfg, rdb, map[string]agent.Func{"echo": echo})()

	ctx := context.Background()
	client := tasks.NewClient(rdb)
	for _, t := range []tasks.Task{
		{ID: "a-1", Agent: "echo", Tenant: "acme", Priority: tasks.PriorityHigh},
		{ID: "i-1", Agent: "echo", Tenant: "initech"},
		{ID: "d-1", Agent: "echo"}, // the default tenant
	} {
		if _, err := client.Enqueue(ctx, t); err != nil {
			panic(err)
		}
	}
	for _, id := range []string{"a-1", "i-1", "d-1"} {
		v := waitEnded(ctx, client, id)
		fmt.Printf("%s %s tenant=%q priority=%s\n", v.ID, v.State, v.Tenant, v.Priority)
	}
	// Output:
	// a-1 succeeded tenant="acme" priority=high
	// i-1 succeeded tenant="initech" priority=normal
	// d-1 succeeded tenant="" priority=normal
}

// Example_budgets: an agent's budget of tokens per window, shared by every
// worker. A Go agent reports what it used in its reply (here an OpenAI
// shaped "usage"); once the window's tokens are spent, the agent's next
// tasks wait (deferred, no attempt used) instead of running.
func Example_budgets() {
	rdb, stop := exampleRedis()
	defer stop()
	cfg := parse(`
agents:
  llm:
    budget: {tokens: 100, per: 1h}
`)
	llm := agent.Func(func(context.Context, agent.Request) (json.RawMessage, error) {
		return json.RawMessage(`{"answer":"42","usage":{"prompt_tokens":100,"completion_tokens":50,"total_tokens":150}}`), nil
	})
	defer startWorker(cfg, rdb, map[string]agent.Func{"llm": llm})()

	ctx := context.Background()
	client := tasks.NewClient(rdb)
	if _, err := client.Enqueue(ctx, tasks.Task{ID: "first", Agent: "llm"}); err != nil {
		panic(err)
	}
	v := waitEnded(ctx, client, "first")
	fmt.Println(v.ID, v.State)

	if _, err := client.Enqueue(ctx, tasks.Task{ID: "second", Agent: "llm"}); err != nil {
		panic(err)
	}
	ev := waitEvent(ctx, client, "second", "deferred")
	why, _, _ := strings.Cut(ev.Error, "; room again at") // then the window's end
	fmt.Println("second", ev.Event+":", why)
	v2, err := client.Store().Get(ctx, "second")
	if err != nil {
		panic(err)
	}
	fmt.Println("waiting for:", v2.WaitingFor)
	// Output:
	// first succeeded
	// second deferred: budget "agent llm" tokens 100/1h0m0s exhausted
	// waiting for: budget
}

// waitEvent polls task id's history until it has an event named name.
func waitEvent(ctx context.Context, client *tasks.Client, id, name string) tasks.Event {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		events, _ := client.Store().History(ctx, id)
		if i := slices.IndexFunc(events, func(ev tasks.Event) bool { return ev.Event == name }); i >= 0 {
			return events[i]
		}
	}
	panic("task " + id + " has no " + name + " event")
}

// Example_webhooks: a webhook is configured by name (its URL and its
// signing secret, read from the environment); a task names the webhooks
// to tell of its events, and a worker POSTs each event to each of them,
// signed (Standard Webhooks).
func Example_webhooks() {
	rdb, stop := exampleRedis()
	defer stop()
	got := make(chan string, 10)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var msg struct {
			Type string
			Data struct{ Task struct{ ID string } }
		}
		_ = json.Unmarshal(body, &msg)
		got <- msg.Type + " " + msg.Data.Task.ID + " signed=" + fmt.Sprint(r.Header.Get("webhook-signature") != "")
	}))
	defer receiver.Close()

	if err := os.Setenv("RESULTS_SECRET", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"); err != nil {
		panic(err)
	}
	cfg := parse(`
webhooks:
  results:
    url: ` + receiver.URL + `/agentq
    secret: ${RESULTS_SECRET}
    events: [succeeded]
`)
	defer startWorker(cfg, rdb, map[string]agent.Func{"echo": echo})()

	client := tasks.NewClient(rdb)
	if _, err := client.Enqueue(context.Background(), tasks.Task{ID: "job-1", Agent: "echo", Notify: []string{"results"}}); err != nil {
		panic(err)
	}
	fmt.Println(<-got)
	// Output:
	// task.succeeded job-1 signed=true
}

// Example_schedules: a schedule in the config enqueues a task on its cron
// (6 fields, seconds first, or @every); one worker of the fleet enqueues
// each due task, and a worker runs it as any other.
func Example_schedules() {
	rdb, stop := exampleRedis()
	defer stop()
	cfg := parse(`
agents:
  ping: {timeout: 10s} # a Go agent's block: the schedule's agent must be in the config
schedules:
  heartbeat: {cron: "@every 1s", agent: ping, params: {from: schedule}}
`)
	ran := make(chan string, 1)
	var once sync.Once
	ping := agent.Func(func(_ context.Context, req agent.Request) (json.RawMessage, error) {
		once.Do(func() { ran <- string(req.Params) })
		return nil, nil
	})
	defer startWorker(cfg, rdb, map[string]agent.Func{"ping": ping})()

	fmt.Println("ran with", <-ran)
	// Output:
	// ran with {"from":"schedule"}
}
