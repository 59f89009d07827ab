package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/worker"
)

// Knobs of BenchmarkIOBound (environment variables, optional):
//
//	AGENTQ_BENCH_IO_TASKS   tasks per round (4000 at 50 ms, 2000 at 200 ms: about a second each)
//	AGENTQ_BENCH_IO_ROUNDS  A/B rounds of each load (5)

// ioAgent is the name the HTTP agent of BenchmarkIOBound is configured
// under.
const ioAgent = "io"

// BenchmarkIOBound's headlines: the throughput ratio of each load, and the
// worker's CPU per task (agentq's over asynq's; issue #36's goals: ≥ 0.95
// and ≤ 1.3).
const (
	hlIO50  = "io-bound 50ms/c=200 agentq/asynq throughput ratio"
	hlIO200 = "io-bound 200ms/c=400 agentq/asynq throughput ratio"
	hlIOCPU = "worker CPU per task agentq/asynq ratio"
)

// ioLoad is one load of BenchmarkIOBound: HTTP calls of delay at
// concurrency c, n tasks a round.
type ioLoad struct {
	delay    time.Duration
	c, n     int
	headline string
}

// ioRound is what one timed round of a side saw: when asynq's processed
// counter reached n, and the CPU time (seconds) this process spent from
// the queue's resumption to then.
type ioRound struct {
	end time.Time
	cpu float64
}

// ioRun runs one round of a side over n tasks.
type ioRun func(ctx context.Context, n int) (ioRound, error)

// ioClient is the plain asynq side's HTTP client: the transport settings of
// agentq's HTTP agent (agent.defaultClient: keep-alive, 10s dial and TLS
// handshake bounds, 90s idle timeout), with room for c idle connections to
// the one host.
func ioClient(c int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   10 * time.Second,
		MaxIdleConns:          c,
		MaxIdleConnsPerHost:   c,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
	}}
}

// BenchmarkIOBound measures an I/O-bound agent, the two loads of issue #36
// (50 ms HTTP calls at concurrency 200, and DESIGN §5's 200 ms calls at
// concurrency 400; target ≥ 0.95× plain asynq): the whole agentq pipeline
// (worker.New + Run) with an HTTP agent from the config
// (agents.io.http.url, agentq's own HTTP client) against a plain asynq
// server at the same concurrency whose handler POSTs the task's payload to
// the same backend (ioClient) and reads the reply. The backend is a
// process of its own (io_backend_test.go) on loopback answering every POST
// after the delay. Both sides run over the same prefilled tasks in the
// paused default queue, interleaved (asynq, agentq, asynq, …); the rate
// runs from the backend's first request to asynq's processed counter
// reaching N.
//
// The worker CPU per task is this process's CPU time (getrusage) from the
// queue's resumption to the N-th completion, over N: the server of the
// side being measured (one at a time), its go-redis client and the
// benchmark's 1 ms poll of the processed counter (the same for both
// sides), not the backend's.
//
// Each side keeps its HTTP client (and so its idle connections) across
// rounds, as a running service would; the detail lines give the
// connections each round opened to the backend (agentq's HTTP agent uses
// the agent package's shared client, whose idle pool per host may be
// smaller than c: connections beyond it are closed and dialled again).
func BenchmarkIOBound(b *testing.B) {
	skipShort(b)
	srv := redistest.Start(b)
	rounds := envInt("AGENTQ_BENCH_IO_ROUNDS", 5)
	loads := []ioLoad{
		{delay: 50 * time.Millisecond, c: 200, n: envInt("AGENTQ_BENCH_IO_TASKS", 4000), headline: hlIO50},
		{delay: 200 * time.Millisecond, c: 400, n: envInt("AGENTQ_BENCH_IO_TASKS", 2000), headline: hlIO200},
	}
	cpu := make([]float64, len(loads))
	for i, l := range loads {
		var tput float64
		tput, cpu[i] = l.measure(b, srv, rounds)
		headline(l.headline, "%.2f", tput)
	}
	headline(hlIOCPU, "%.2f at 50ms/c=200 (%.2f at 200ms/c=400)", cpu[0], cpu[1])
}

// measure runs the load's interleaved rounds, reports them and returns
// agentq's throughput and worker CPU per task over asynq's (medians).
func (l ioLoad) measure(b *testing.B, srv *redistest.Server, rounds int) (tput, cpu float64) {
	be := newIOBackend(b, l.delay)
	hc := ioClient(l.c)
	defer hc.CloseIdleConnections()
	conns, cpuUS := map[string][]float64{}, map[string][]float64{}
	counted := func(name string, run ioRun, n int) side {
		return side{name, func(ctx context.Context) (float64, error) {
			if err := be.reset(); err != nil {
				return 0, err
			}
			r, err := run(ctx, n)
			if err != nil {
				return 0, err
			}
			st, err := be.stats()
			if err != nil {
				return 0, err
			}
			if st.calls != int64(n) {
				return 0, fmt.Errorf("backend saw %d calls, want %d", st.calls, n)
			}
			conns[name] = append(conns[name], float64(st.conns))
			cpuUS[name] = append(cpuUS[name], r.cpu*1e6/float64(n))
			return float64(n) / r.end.Sub(st.first).Seconds(), nil
		}}
	}
	agentqRun := func(ctx context.Context, n int) (ioRound, error) { return runIOAgentq(ctx, srv, be.url, l.c, n) }
	asynqRun := func(ctx context.Context, n int) (ioRound, error) { return runIOAsynq(ctx, srv, be.url, hc, l.c, n) }
	warm := []side{counted("warm-asynq", asynqRun, l.n/4), counted("warm-agentq", agentqRun, l.n/4)}
	sides := []side{counted("asynq", asynqRun, l.n), counted("agentq", agentqRun, l.n)}
	res := interleave(b, srv, rounds, warm, sides)
	ma, mg := median(res["asynq"]), median(res["agentq"])
	ca, cg := median(cpuUS["asynq"]), median(cpuUS["agentq"])
	for _, s := range sides {
		detail("%s/c=%d rounds (n=%d) %-7s %s tasks/s  worker CPU %s µs/task  (connections opened: %s)",
			l.delay, l.c, l.n, s.name+":", fmtRates(res[s.name]), fmtRates(cpuUS[s.name]), fmtRates(conns[s.name]))
	}
	report("io-bound (%s HTTP, c=%d) asynq %.0f tasks/s  agentq %.0f tasks/s  ratio %.2f  (ideal %.0f tasks/s)",
		l.delay, l.c, ma, mg, mg/ma, float64(l.c)/l.delay.Seconds())
	report("io-bound (%s HTTP, c=%d) worker CPU per task: asynq %.0f µs  agentq %.0f µs  ratio %.2f",
		l.delay, l.c, ca, cg, cg/ca)
	return mg / ma, cg / ca
}

// runIOAgentq runs a worker at concurrency c with the HTTP agent ioAgent
// (config agents.io.http.url = url) over n prefilled tasks.
func runIOAgentq(ctx context.Context, srv *redistest.Server, url string, c, n int) (ioRound, error) {
	rdb := newClient(srv)
	defer rdb.Close()
	if err := prefill(ctx, rdb, n, ioAgent); err != nil {
		return ioRound{}, err
	}
	cfg := agentqConfig(srv, c)
	cfg.Agents[ioAgent] = config.Agent{Name: ioAgent, HTTP: &config.HTTP{URL: url}, Settings: cfg.Defaults.Clone()}
	w, err := worker.New(cfg, rdb, worker.WithLogger(discardLogger()))
	if err != nil {
		return ioRound{}, err
	}
	if err := pauseQueue(rdb); err != nil {
		return ioRound{}, err
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(rctx) }()
	r, werr := timedIORound(ctx, rdb, n)
	cancel()
	if err := <-done; err != nil {
		return ioRound{}, err
	}
	if werr != nil {
		return ioRound{}, werr
	}
	return r, checkNoFailures(ctx, rdb)
}

// timedIORound resumes the paused queue once a server is up and waits for
// n tasks processed, noting this process's CPU time in between. It
// collects the garbage of the set-up first (the prefill's, the previous
// round's), so that a round pays for its own.
func timedIORound(ctx context.Context, rdb redis.UniversalClient, n int) (ioRound, error) {
	runtime.GC()
	if _, err := resumeWhenUp(ctx, rdb); err != nil {
		return ioRound{}, err
	}
	u0 := procCPU()
	end, err := waitProcessed(ctx, rdb, int64(n), 2*time.Minute)
	return ioRound{end: end, cpu: procCPU() - u0}, err
}

// runIOAsynq is runIOAgentq's twin: a plain asynq server at concurrency c
// whose handler POSTs the task's payload to url with hc and reads the
// reply, over the same prefilled tasks.
func runIOAsynq(ctx context.Context, srv *redistest.Server, url string, hc *http.Client, c, n int) (ioRound, error) {
	rdb := newClient(srv)
	defer rdb.Close()
	if err := prefill(ctx, rdb, n, ioAgent); err != nil {
		return ioRound{}, err
	}
	s := asynq.NewServerFromRedisClient(rdb, asynqConfig(c, true))
	if err := pauseQueue(rdb); err != nil {
		return ioRound{}, err
	}
	if err := s.Start(asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		return postPayload(ctx, hc, url, t.Payload())
	})); err != nil {
		return ioRound{}, err
	}
	r, werr := timedIORound(ctx, rdb, n)
	s.Shutdown()
	if werr != nil {
		return ioRound{}, werr
	}
	return r, checkNoFailures(ctx, rdb)
}

// postPayload is the plain asynq side's handler: it POSTs payload to url
// with hc and reads the reply.
func postPayload(ctx context.Context, hc *http.Client, url string, payload []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(payload))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.ReadAll(resp.Body); err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("backend answered %s", resp.Status)
	}
	return nil
}
