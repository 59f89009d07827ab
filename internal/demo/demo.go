// Package demo runs agentq's main job end to end on an embedded, in-memory
// Redis (miniredis): a worker, a mix of tasks against bundled demo agents
// (some succeed, some recover after retries, one recovers after a restart,
// some are dead-lettered), progress while it runs, and the dead letters as
// the inspector shows them. Nothing in embedded mode is durable.
package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/cli"
	"github.com/agentq/agentq/resilience"
	"github.com/agentq/agentq/tasks"
	"github.com/agentq/agentq/worker"
)

// AgentMode is the argument that makes the demo binary act as the bundled
// exec agent (`demo agent`): it reads an ActionRequest on stdin and answers
// as its params say.
const AgentMode = "agent"

// RunAgent is the bundled exec agent: {"mode":"ok"} succeeds, {"mode":"garbage"}
// prints something that is not an ActionResponse.
func RunAgent(in io.Reader, out io.Writer) int {
	var req agent.Request
	if err := json.NewDecoder(in).Decode(&req); err != nil {
		fmt.Fprintln(os.Stderr, "demo agent: bad request:", err)
		return 2
	}
	var p struct {
		Mode string `json:"mode"`
	}
	_ = json.Unmarshal(req.Params, &p)
	if p.Mode == "garbage" {
		fmt.Fprintln(out, "Traceback (most recent call last): oops, this is not JSON")
		return 0
	}
	_ = json.NewEncoder(out).Encode(agent.Response{Status: "success", Data: json.RawMessage(`{"files_changed":3}`)})
	return 0
}

// Run plays the demo, writing to out. It returns when every task has ended.
func Run(ctx context.Context, out io.Writer) error {
	fmt.Fprintln(out, strings.Repeat("!", 78))
	fmt.Fprintln(out, "!! EMBEDDED MODE: Redis is miniredis, in this process's memory.")
	fmt.Fprintln(out, "!! NOTHING IS DURABLE: stop the demo and every task is gone.")
	fmt.Fprintln(out, "!! Production runs against a real Redis (see README: quick start).")
	fmt.Fprintln(out, strings.Repeat("!", 78))

	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		return fmt.Errorf("demo: start embedded redis: %w", err)
	}
	defer mr.Close()
	stopClock := tickMiniredis(mr)
	defer stopClock()
	url := "redis://" + mr.Addr() + "/0"
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	// A flaky LLM-like backend on loopback: each task's first two calls get a
	// 503 overload, the third succeeds.
	var mu sync.Mutex
	calls := map[string]int{}
	llm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req agent.Request
		_ = json.NewDecoder(r.Body).Decode(&req)
		mu.Lock()
		calls[req.TaskID]++
		n := calls[req.TaskID]
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/strict"):
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}`)
		case n <= 2:
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"error":{"message":"The server is overloaded or not ready yet.","type":"server_error"}}`)
		default:
			fmt.Fprintf(w, `{"choices":[{"message":{"content":"summary of %s"}}]}`, req.TaskID)
		}
	}))
	defer llm.Close()

	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("demo: find own binary for the exec agent: %w", err)
	}
	start := time.Now()
	// The outage lasts 2.5s from the outage agent's first call, however
	// late a loaded machine makes that call.
	var outageOnce sync.Once
	var outageUntil time.Time
	yaml := fmt.Sprintf(`
worker:
  concurrency: 10
  shutdown_timeout: 5s
defaults:
  timeout: 5s
  retry: {max_attempts: 3, initial_backoff: 200ms, max_backoff: 1s, jitter: 0.2}
  circuit_breaker: {mode: consecutive, failure_threshold: 50, cooldown: 2s}
  # The demo shortens the restart delays (production default: 1m, 2m, 4m).
  restart: {max_restarts: 3, delays: [1s, 2s, 4s]}
agents:
  git_agent:
    exec: {command: [%q, %q]}
    # The exec agent is a new process each time; a loaded machine may be
    # slow to start one.
    timeout: 30s
  llm:
    http: {url: %q}
  strict_llm:
    http: {url: %q}
`, self, AgentMode, llm.URL+"/v1/chat", llm.URL+"/v1/strict")
	cfg, err := config.Parse([]byte(yaml), "demo.yaml")
	if err != nil {
		return err
	}
	cfg.Redis.URL = url

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	w, err := worker.New(cfg, rdb, worker.WithLogger(log),
		worker.WithAgent("echo", agent.Func(func(ctx context.Context, r agent.Request) (json.RawMessage, error) {
			return r.Params, nil
		})),
		// A provider outage that outlasts a run's retries: the task is
		// restarted later (1s here) and recovers.
		worker.WithAgent("outage", agent.Func(func(ctx context.Context, r agent.Request) (json.RawMessage, error) {
			outageOnce.Do(func() { outageUntil = time.Now().Add(2500 * time.Millisecond) })
			if time.Now().Before(outageUntil) {
				return nil, &resilience.Failure{Err: errors.New("dial tcp 10.0.0.7:443: connect: connection refused")}
			}
			return json.RawMessage(`{"ok":true}`), nil
		})),
	)
	if err != nil {
		return err
	}
	wctx, stopWorker := context.WithCancel(ctx)
	werr := make(chan error, 1)
	go func() { werr <- w.Run(wctx) }()

	client := tasks.NewClient(rdb)
	type spec struct {
		id, agent, note string
		params          string
	}
	var specs []spec
	for i := 1; i <= 4; i++ {
		specs = append(specs, spec{fmt.Sprintf("echo-%d", i), "echo", "succeeds at once", fmt.Sprintf(`{"n":%d}`, i)})
	}
	specs = append(specs,
		spec{"git-status-1", "git_agent", "exec agent, succeeds", `{"mode":"ok"}`},
		spec{"git-status-2", "git_agent", "exec agent, succeeds", `{"mode":"ok"}`},
		spec{"git-garbage-1", "git_agent", "exec agent prints garbage → logic_error, dead letter", `{"mode":"garbage"}`},
		spec{"summarize-1", "llm", "503 twice, then succeeds (retries)", `{"text":"…"}`},
		spec{"summarize-2", "llm", "503 twice, then succeeds (retries)", `{"text":"…"}`},
		spec{"long-prompt-1", "strict_llm", "400 prompt too long → context_length, dead letter", `{"text":"…"}`},
		spec{"outage-1", "outage", "backend down ~2.5s: retries run out, restarted, recovers", `{}`},
		spec{"typo-1", "summarise", "unknown agent → not_supported, dead letter", `{}`},
	)
	fmt.Fprintln(out, "\nnote: the demo shortens restart delays to 1s, 2s, 4s (production default: 1m, 2m, 4m)")
	fmt.Fprintf(out, "\nenqueueing %d tasks:\n", len(specs))
	ids := make([]string, 0, len(specs))
	for _, s := range specs {
		res, err := client.Enqueue(ctx, tasks.Task{ID: s.id, Agent: s.agent, Action: "run", Params: json.RawMessage(s.params)})
		if err != nil {
			stopWorker()
			return fmt.Errorf("demo: enqueue %s: %w", s.id, err)
		}
		ids = append(ids, res.ID)
		fmt.Fprintf(out, "  %-14s → %-11s %s\n", s.id, s.agent, s.note)
	}
	fmt.Fprintln(out)

	store := client.Store()
	deadline := time.Now().Add(60 * time.Second)
	for {
		counts := map[tasks.State]int{}
		done := 0
		for _, id := range ids {
			st := tasks.State("unknown")
			if v, err := store.Get(ctx, id); err == nil {
				st = v.State
			}
			counts[st]++
			if st.Terminal() {
				done++
			}
		}
		fmt.Fprintf(out, "[%5.1fs] %s\n", time.Since(start).Seconds(), summary(counts))
		if done == len(ids) || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
	stopWorker()
	if err := <-werr; err != nil {
		return err
	}

	fmt.Fprintln(out, "\n$ inspector task outage-1")
	insp := &cli.App{Out: out, Err: out, In: strings.NewReader(""), Getenv: func(string) string { return "" }}
	cli.Main(ctx, insp, cli.NewInspectorCmd, []string{"--redis", url, "task", "outage-1"})
	fmt.Fprintln(out, "\n$ inspector dlq list")
	if code := cli.Main(ctx, insp, cli.NewInspectorCmd, []string{"--redis", url, "dlq", "list"}); code != 0 {
		return fmt.Errorf("demo: inspector exited %d", code)
	}
	fmt.Fprintln(out, "\n$ inspector stats")
	cli.Main(ctx, insp, cli.NewInspectorCmd, []string{"--redis", url, "stats"})
	fmt.Fprintln(out, "\ndemo done. Reminder: embedded mode is NOT durable; everything above is gone now.")
	return nil
}

func summary(c map[tasks.State]int) string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, c[tasks.State(k)]))
	}
	return strings.Join(parts, "  ")
}

// tickMiniredis advances miniredis's clock with the wall clock so that
// key expiry behaves; it returns a stop function.
func tickMiniredis(mr *miniredis.Miniredis) func() {
	stop := make(chan struct{})
	go func() {
		last := time.Now()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-t.C:
				mr.FastForward(now.Sub(last))
				last = now
			}
		}
	}()
	return func() { close(stop) }
}
