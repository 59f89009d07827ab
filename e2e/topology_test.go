package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/tasks"
)

// The topology suite: agentq on a Sentinel group (master, replica, three
// sentinels) and on a 6-node Cluster (3 masters, 3 replicas), all real
// redis-server processes on loopback. `make test` runs it with -v (its
// own step) so that the counts it logs are printed.

// topologyConfig is a worker/API config on the Redis block redisBlock with
// agents llm (queue llm) and tool (queue tools) calling url, and
// wait_replicas 1.
func topologyConfig(t *testing.T, redisBlock, url string) string {
	return writeConfig(t, fmt.Sprintf(`
redis:
%s
  wait_replicas: 1
  wait_timeout: 2s
worker: {concurrency: 20, shutdown_timeout: 3s, queues: {llm: 2, tools: 1}}
defaults:
  timeout: 10s
  retry: {max_attempts: 4, initial_backoff: 50ms, max_backoff: 200ms, jitter: 0.1}
  circuit_breaker: {mode: rate, cooldown: 1s}   # the default mode: its window and failing-task keys share the breaker's hash tag
  restart: {max_restarts: 3, delays: [200ms]}
tenants:
  t1: {concurrency: 3}                          # the API's producers are tenants t0..t3; one capped
agents:
  llm:  {http: {url: %q}, queue: llm}
  tool: {http: {url: %q}, queue: tools}
`, redisBlock, url, url))
}

// stream produces tasks until stop is closed: one goroutine POSTs single
// tasks to the HTTP API (apiProducers of them), another runs `enqueuer
// --file -` with fileChunk tasks a run. acked are the IDs whose enqueue was acknowledged (HTTP 200/202, or
// printed by enqueuer); refused counts the tasks whose enqueue failed.
type stream struct {
	mu      sync.Mutex
	acked   []string
	refused atomic.Int64
	wg      sync.WaitGroup
}

func (s *stream) ack(ids ...string) {
	s.mu.Lock()
	s.acked = append(s.acked, ids...)
	s.mu.Unlock()
}

func (s *stream) ackedIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.acked...)
}

// The stream's producers: HTTP clients sending one task at a time, and
// the size of each enqueuer --file run.
const (
	apiProducers = 4
	fileChunk    = 50
)

func startStream(b bins, cfg, api string, stop <-chan struct{}) *stream {
	s := &stream{}
	agent := func(n int) string {
		if n%2 == 0 {
			return "llm"
		}
		return "tool"
	}
	s.wg.Add(apiProducers + 1)
	for g := range apiProducers {
		go func() { // the HTTP API, one task a request
			defer s.wg.Done()
			client := &http.Client{Timeout: 5 * time.Second}
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("api-%d-%d", g, n)
				body := fmt.Sprintf(`{"id":%q,"agent":%q,"tenant":"t%d","params":{"kind":"ok"}}`, id, agent(n), g)
				resp, err := client.Post(api+"/api/v1/tasks", "application/json", strings.NewReader(body))
				if err != nil {
					s.refused.Add(1)
					time.Sleep(20 * time.Millisecond)
					continue
				}
				resp.Body.Close()
				if resp.StatusCode == http.StatusAccepted || resp.StatusCode == http.StatusOK {
					s.ack(id)
				} else {
					s.refused.Add(1)
				}
			}
		}()
	}
	go func() { // enqueuer --file, fileChunk tasks a run
		defer s.wg.Done()
		for chunk := 0; ; chunk++ {
			select {
			case <-stop:
				return
			default:
			}
			var lines []string
			for i := range fileChunk {
				n := chunk*fileChunk + i
				lines = append(lines, fmt.Sprintf(`{"id":"file-%d","agent":%q,"priority":%q,"params":{"kind":"ok"}}`, n, agent(n),
					[]string{"normal", "high", "low"}[n%3]))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			cmd := exec.CommandContext(ctx, b.enqueuer, "--config", cfg, "--file", "-")
			cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
			var out bytes.Buffer
			cmd.Stdout = &out
			_ = cmd.Run()
			cancel()
			ids := strings.Fields(out.String())
			s.ack(ids...)
			s.refused.Add(int64(len(lines) - len(ids)))
		}
	}()
	return s
}

// failover is one topology's run: the servers, and how to kill the master
// that matters and wait for its replacement.
type failover struct {
	name       string
	redisBlock string
	kill       func(t *testing.T) (old string, killed *redistest.Server)
	promoted   func(t *testing.T, old string) string
}

func TestTopologyFailover(t *testing.T) {
	b := buildBins(t)
	t.Run("sentinel", func(t *testing.T) {
		sg := redistest.StartSentinel(t)
		testFailover(t, b, failover{
			name: "sentinel",
			redisBlock: fmt.Sprintf("  sentinel: {master_name: %s, addrs: [%s]}", sg.MasterName,
				strings.Join(sg.Sentinels, ", ")),
			kill: func(t *testing.T) (string, *redistest.Server) { old := sg.Master(t); return old, sg.KillMaster(t) },
			promoted: func(t *testing.T, old string) string {
				return sg.WaitFailover(t, old, 30*time.Second)
			},
		})
	})
	t.Run("cluster", func(t *testing.T) {
		cl := redistest.StartCluster(t)
		key := "asynq:{llm}:pending" // the master of queue llm
		testFailover(t, b, failover{
			name:       "cluster",
			redisBlock: fmt.Sprintf("  cluster: {addrs: [%s]}", strings.Join(cl.Addrs()[:3], ", ")),
			kill: func(t *testing.T) (string, *redistest.Server) {
				old := cl.MasterOf(t, key)
				return old, cl.Kill(t, old)
			},
			promoted: func(t *testing.T, old string) string {
				return cl.WaitPromoted(t, key, old, 30*time.Second)
			},
		})
	})
}

// testFailover streams tasks through the API and enqueuer --file into two
// workers, SIGKILLs the master mid-stream, and requires every acknowledged
// task to succeed afterwards.
func testFailover(t *testing.T, b bins, f failover) {
	backend := newChaosBackend(t)
	cfg := topologyConfig(t, f.redisBlock, backend.srv.URL)
	parsed, err := config.Load(cfg)
	require.NoError(t, err)
	rdb, err := parsed.Redis.NewClient(nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = rdb.Close() })

	addr := freeAddr(t)
	api := "http://" + addr
	procs := []*proc{start(t, "serve", b.enqueuer, "--config", cfg, "serve", "--http", addr)}
	for i := range 2 {
		procs = append(procs, start(t, fmt.Sprintf("worker-%d", i), b.worker, "--config", cfg))
	}
	waitHTTP(t, api+"/healthz", 30*time.Second)

	stop := make(chan struct{})
	s := startStream(b, cfg, api, stop)
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		s.wg.Wait()
	}()
	// Let the stream run until tasks are flowing through the workers.
	deadline := time.Now().Add(30 * time.Second)
	for backend.finals.Load() < 400 {
		require.True(t, time.Now().Before(deadline), "fewer than 400 tasks finished within 30s before the kill (%d)", backend.finals.Load())
		time.Sleep(20 * time.Millisecond)
	}
	beforeKill := len(s.ackedIDs())
	t.Logf("topology %s: %d acknowledged, %d refused, %d finished before the kill", f.name, beforeKill, s.refused.Load(), backend.finals.Load())
	// The tasks still waiting or running at the kill.
	ctx := context.Background()
	before, err := chaosStates(ctx, rdb, s.ackedIDs())
	require.NoError(t, err)
	var waiting []string
	for id, st := range before {
		if !st.Terminal() {
			waiting = append(waiting, id)
		}
	}
	killedAt := time.Now()
	old, killed := f.kill(t)
	newMaster := f.promoted(t, old)
	promotedAfter := time.Since(killedAt)
	// The first task to finish after the promotion: one that was waiting
	// at the kill, or one acknowledged since.
	base := -1
	var firstDone time.Duration
	deadline = time.Now().Add(60 * time.Second)
	for firstDone == 0 {
		require.True(t, time.Now().Before(deadline), "no task finished within 60s of the promotion")
		n, err := terminalSince(rdb, waiting)
		later, err2 := terminalSince(rdb, s.ackedIDs()[beforeKill:])
		switch {
		case err != nil || err2 != nil:
		case base < 0:
			base = n // the new master's view at the promotion
		case n > base || later > 0:
			firstDone = time.Since(killedAt)
		}
		time.Sleep(25 * time.Millisecond)
	}
	// The promoted master has no replica: with wait_replicas 1 its enqueues
	// are refused (loudly) until one is back. Bring the killed node back,
	// as its supervisor would: it rejoins as the new master's replica, and
	// enqueues are acknowledged again.
	killed.Restart()
	afterPromotion := len(s.ackedIDs())
	deadline = time.Now().Add(60 * time.Second)
	for len(s.ackedIDs()) < afterPromotion+100 {
		require.True(t, time.Now().Before(deadline), "fewer than 100 enqueues acknowledged within 60s of the old master's return")
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	s.wg.Wait()

	acked := s.ackedIDs()
	require.Greater(t, len(acked), beforeKill, "enqueues acknowledged after the failover")
	states := chaosWaitTerminal(t, rdb, acked, 150*time.Second)
	lost := 0
	for _, id := range acked {
		if states[id] != tasks.StateSucceeded {
			lost++
			t.Errorf("acknowledged task %s ended %q, want succeeded", id, states[id])
		}
	}
	dups := backend.duplicates()
	t.Logf("topology %s: acknowledged %d, refused during the failover %d, lost %d, duplicate runs %d; "+
		"master %s killed, %s promoted after %.1fs, first task finished %.1fs after the kill",
		f.name, len(acked), s.refused.Load(), lost, len(dups), old, newMaster,
		promotedAfter.Seconds(), firstDone.Seconds())
	require.Zero(t, lost)
	for _, q := range []string{"llm", "tools"} {
		chaosFairDrained(t, rdb, q)
	}
	for _, p := range procs {
		require.True(t, chaosAlive(p), "%s exited during the failover (no restart, no crash loop)", p.log)
	}
	// The inspector, a new process after the failover, finds the new master.
	last := acked[len(acked)-1]
	task := inspectJSON(t, b, cfg, "task", last, "--json")
	require.Equal(t, "succeeded", task[0]["state"])
	stats := inspectJSON(t, b, cfg, "stats", "--json")
	require.NotEmpty(t, stats[0]["queues"])
}

// terminalSince counts the tasks of ids whose record is terminal.
func terminalSince(rdb redis.UniversalClient, ids []string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	states, err := chaosStates(ctx, rdb, ids)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, st := range states {
		if st.Terminal() {
			n++
		}
	}
	return n, nil
}

// inspectJSON runs an inspector command with --json and decodes its
// output (one object, or JSON Lines into a slice).
func inspectJSON(t *testing.T, b bins, cfg string, args ...string) []map[string]any {
	t.Helper()
	out, errOut, code := run(t, "", b.inspector, append([]string{"--config", cfg}, args...)...)
	require.Equal(t, 0, code, "inspector %v: %s", args, errOut)
	var list []map[string]any
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var m map[string]any
		require.NoError(t, dec.Decode(&m), out)
		list = append(list, m)
	}
	return list
}

// TestTopologyClusterCommands: every command on a 6-node Cluster, with the
// agents' queues on two different masters: tasks succeed, dead-letter,
// restart and are requeued; the inspector lists dead letters, restarts,
// breakers, stats and histories across shards; agentq's own keys are
// spread over the masters.
func TestTopologyClusterCommands(t *testing.T) {
	b := buildBins(t)
	cl := redistest.StartCluster(t)
	// Two queues whose keys live on different masters.
	var qa, qb string
	for i := 0; qb == ""; i++ {
		require.Less(t, i, 50, "no two queues on different masters")
		q := fmt.Sprintf("q%d", i)
		switch {
		case qa == "":
			qa = q
		case cl.MasterOf(t, "asynq:{"+q+"}:pending") != cl.MasterOf(t, "asynq:{"+qa+"}:pending"):
			qb = q
		}
	}
	backend := newChaosBackend(t)
	cfg := writeConfig(t, fmt.Sprintf(`
redis:
  cluster: {addrs: [%s]}
worker: {concurrency: 8, shutdown_timeout: 3s, queues: {%s: 1, %s: 1}}
defaults:
  timeout: 10s
  retry: {max_attempts: 1}
agents:
  good:  {http: {url: %q}, queue: %s}
  bad:   {http: {url: %q}, queue: %s}
  flaky: {http: {url: %q}, queue: %s, restart: {max_restarts: 1, delays: [6s]}}
`, strings.Join(cl.Addrs()[:3], ", "), qa, qb, backend.srv.URL, qa, backend.srv.URL, qb, backend.srv.URL, qa))
	start(t, "worker", b.worker, "--config", cfg)

	enqueue := func(agent, id, params string) {
		_, errOut, code := run(t, "", b.enqueuer, "--config", cfg, "--agent", agent, "--id", id, "--params", params)
		require.Equal(t, 0, code, errOut)
	}
	enqueue("flaky", "f1", `{"kind":"flaky","fail":2}`)
	enqueue("good", "g1", `{"kind":"ok"}`)
	enqueue("bad", "b1", `{"kind":"bad"}`)
	// The --redis URL form replaces the file's cluster block.
	_, errOut, code := run(t, "", b.enqueuer, "--config", cfg, "--redis", cl.URL(), "--agent", "good", "--id", "g2")
	require.Equal(t, 0, code, errOut)

	rdb := cl.Client(t)
	// f1's first run fails: it waits for its restart, listed by the inspector.
	deadline := time.Now().Add(30 * time.Second)
	for {
		rs := inspectJSON(t, b, cfg, "restarts", "--json")
		if len(rs) == 1 && rs[0]["id"] == "f1" {
			break
		}
		// On a loaded machine one inspector process can outlast f1's
		// restart window (its delay): the record shows it went through it.
		if v, err := tasks.NewStore(rdb).Get(context.Background(), "f1"); err == nil && v.Restarts >= 1 && v.State.Terminal() {
			t.Logf("f1's restart window passed between two inspector calls")
			break
		}
		require.True(t, time.Now().Before(deadline), "f1 never listed as restarting: %v", rs)
		time.Sleep(50 * time.Millisecond)
	}
	states := waitStates(t, rdb, []string{"g1", "g2", "b1", "f1"}, 60*time.Second)
	require.Equal(t, tasks.StateSucceeded, states["g1"].State)
	require.Equal(t, tasks.StateSucceeded, states["g2"].State)
	require.Equal(t, tasks.StateDeadLettered, states["b1"].State)
	require.Equal(t, tasks.StateDeadLettered, states["f1"].State, "f1 failed its run and its one restart")

	task := inspectJSON(t, b, cfg, "task", "f1", "--json")
	require.Len(t, task, 1)
	events := []string{}
	for _, e := range task[0]["history"].([]any) {
		events = append(events, e.(map[string]any)["event"].(string))
	}
	require.Contains(t, events, "restarting", "f1's history: %v", events)
	require.Contains(t, events, "dead_lettered", "f1's history: %v", events)

	dl := inspectJSON(t, b, cfg, "dlq", "list", "--json")
	require.Len(t, dl, 2)
	ids := []string{dl[0]["id"].(string), dl[1]["id"].(string)}
	require.ElementsMatch(t, []string{"b1", "f1"}, ids)
	dl = inspectJSON(t, b, cfg, "--redis", cl.URL(), "dlq", "list", "--agent", "bad", "--json")
	require.Len(t, dl, 1)
	require.Equal(t, "invalid_request", dl[0]["error_class"])
	show := inspectJSON(t, b, cfg, "dlq", "show", "f1", "--json")
	require.Equal(t, "f1", show[0]["id"])

	stats := inspectJSON(t, b, cfg, "stats", "--json")
	require.EqualValues(t, 2, stats[0]["dead_letters"])
	queues := map[string]bool{}
	for _, q := range stats[0]["queues"].([]any) {
		queues[q.(map[string]any)["queue"].(string)] = true
	}
	require.True(t, queues[qa] && queues[qb], "stats lists both queues: %v", stats[0]["queues"])

	// Requeue f1: its third call succeeds.
	_, errOut, code = run(t, "", b.inspector, "--config", cfg, "dlq", "requeue", "f1")
	require.Equal(t, 0, code, errOut)
	states = waitStates(t, rdb, []string{"f1"}, 30*time.Second)
	require.Equal(t, tasks.StateSucceeded, states["f1"].State)
	require.Len(t, inspectJSON(t, b, cfg, "dlq", "list", "--json"), 1)

	// Breakers: listed across shards, tripped and reset.
	br := inspectJSON(t, b, cfg, "breakers", "--json")
	keys := map[string]string{}
	for _, x := range br {
		keys[x["key"].(string)] = x["state"].(string)
	}
	require.Equal(t, map[string]string{"good": "closed", "bad": "closed", "flaky": "closed"}, keys)
	_, errOut, code = run(t, "", b.inspector, "--config", cfg, "breaker", "trip", "good", "--for", "1m")
	require.Equal(t, 0, code, errOut)
	for _, x := range inspectJSON(t, b, cfg, "breakers", "--json") {
		if x["key"] == "good" {
			require.Equal(t, "open", x["state"])
		}
	}
	_, errOut, code = run(t, "", b.inspector, "--config", cfg, "breaker", "reset", "good")
	require.Equal(t, 0, code, errOut)
	_, errOut, code = run(t, "", b.inspector, "--config", cfg, "dlq", "purge", "--yes")
	require.Equal(t, 0, code, errOut)
	require.Empty(t, inspectJSON(t, b, cfg, "dlq", "list", "--json"))

	// agentq's own keys are spread over the masters, not piled on one.
	holders := 0
	for _, m := range cl.Masters(t) {
		c := redis.NewClient(&redis.Options{Addr: m})
		n := 0
		iter := c.Scan(context.Background(), 0, "agentq:*", 1000).Iterator()
		for iter.Next(context.Background()) {
			n++
		}
		require.NoError(t, iter.Err())
		_ = c.Close()
		if n > 0 {
			holders++
		}
	}
	require.GreaterOrEqual(t, holders, 2, "agentq keys on at least two masters")
}

// TestWaitReplicasRefusesEnqueue: with redis.wait_replicas 1 and a Redis
// that has no replica, an enqueue is never acknowledged: enqueuer exits 1
// (single and --file) and the API answers 503 unavailable, naming the
// replicas; with a replica attached the same enqueue succeeds.
func TestWaitReplicasRefusesEnqueue(t *testing.T) {
	t.Parallel()
	b := buildBins(t)
	srv := redistest.Start(t)
	cfg := writeConfig(t, fmt.Sprintf(`
redis: {url: %q, wait_replicas: 1, wait_timeout: 100ms}
agents:
  tool: {exec: {command: [%q]}}
`, srv.URL(), b.agent))
	_, errOut, code := run(t, "", b.enqueuer, "--config", cfg, "--agent", "tool", "--id", "w1")
	require.Equal(t, 1, code, errOut)
	require.Contains(t, errOut, "reached 0 of the 1 replicas")
	_, errOut, code = run(t, `{"id":"w2","agent":"tool"}`+"\n", b.enqueuer, "--config", cfg, "--file", "-")
	require.Equal(t, 1, code, errOut)

	addr := freeAddr(t)
	start(t, "serve", b.enqueuer, "--config", cfg, "serve", "--http", addr)
	waitHTTP(t, "http://"+addr+"/healthz", 20*time.Second)
	resp, err := http.Post("http://"+addr+"/api/v1/tasks", "application/json", strings.NewReader(`{"id":"w3","agent":"tool"}`))
	require.NoError(t, err)
	var body map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "%v", body)
	require.Equal(t, "unavailable", body["code"])
	require.Contains(t, body["error"], "replicas")

	// Attach a replica: the same enqueue is acknowledged.
	replica := redistest.Start(t)
	host, port, _ := strings.Cut(srv.Addr, ":")
	require.NoError(t, replica.Client().ReplicaOf(context.Background(), host, port).Err())
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, _, code := run(t, "", b.enqueuer, "--config", cfg, "--agent", "tool", "--id", "w4")
		if code == 0 {
			require.Equal(t, "w4", strings.TrimSpace(out))
			break
		}
		require.True(t, time.Now().Before(deadline), "enqueue still refused with a replica attached")
		time.Sleep(100 * time.Millisecond)
	}
}
