package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/worker"
)

// Knobs of BenchmarkIOBound (environment variables, optional):
//
//	AGENTQ_BENCH_IO_TASKS   tasks per round (2000)
//	AGENTQ_BENCH_IO_ROUNDS  A/B rounds (3)

// ioAgent is the name the HTTP agent of BenchmarkIOBound is configured
// under.
const ioAgent = "io"

// ioBackend is the simulated agent backend of BenchmarkIOBound: an
// httptest server on loopback that answers every POST with a small JSON
// body after delay. It notes the first request of a round (the start of
// the clock, the same point for both sides) and counts the connections
// opened to it.
type ioBackend struct {
	srv   *httptest.Server
	first firstMark
	conns atomic.Int64 // connections accepted since the last reset
	calls atomic.Int64 // requests received since the last reset
}

func newIOBackend(delay time.Duration) *ioBackend {
	be := &ioBackend{}
	be.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		be.first.hit()
		be.calls.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		time.Sleep(delay) // the backend's work, not a test wait
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	be.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			be.conns.Add(1)
		}
	}
	be.srv.Start()
	return be
}

func (be *ioBackend) reset() {
	be.first.ns.Store(0)
	be.conns.Store(0)
	be.calls.Store(0)
}

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

// BenchmarkIOBound measures an I/O-bound agent (DESIGN §5: 200 ms HTTP
// calls, concurrency 400, target ≥ 0.95× plain asynq): the whole agentq
// pipeline (worker.New + Run, concurrency 400) with an HTTP agent from
// the config (agents.io.http.url, agentq's own HTTP client) against a plain
// asynq server at concurrency 400 whose handler POSTs the task's payload to
// the same backend (ioClient) and reads the reply. The backend is an
// httptest server on loopback answering every POST after 200 ms. Both
// sides run over the same prefilled tasks in the paused default queue;
// the rate runs from the backend's first request to asynq's processed
// counter reaching N. Each side keeps its HTTP client (and so its idle
// connections) across rounds, as a running service would; the detail
// lines give the connections each round opened to the backend (agentq's
// HTTP agent uses the agent package's shared client, whose idle pool per
// host may be smaller than 400: connections beyond it are closed and
// dialled again).
func BenchmarkIOBound(b *testing.B) {
	skipShort(b)
	srv := redistest.Start(b)
	const c, delay = 400, 200 * time.Millisecond
	n, rounds := envInt("AGENTQ_BENCH_IO_TASKS", 2000), envInt("AGENTQ_BENCH_IO_ROUNDS", 3)
	be := newIOBackend(delay)
	defer be.srv.Close()
	hc := ioClient(c)
	defer hc.CloseIdleConnections()
	conns := map[string][]float64{}
	counted := func(name string, run func(context.Context, int) (float64, error), n int) side {
		return side{name, func(ctx context.Context) (float64, error) {
			be.reset()
			v, err := run(ctx, n)
			if err == nil && be.calls.Load() != int64(n) {
				err = fmt.Errorf("backend saw %d calls, want %d", be.calls.Load(), n)
			}
			conns[name] = append(conns[name], float64(be.conns.Load()))
			return v, err
		}}
	}
	agentqRun := func(ctx context.Context, n int) (float64, error) { return runIOAgentq(ctx, srv, be, c, n) }
	asynqRun := func(ctx context.Context, n int) (float64, error) { return runIOAsynq(ctx, srv, be, hc, c, n) }
	warm := []side{counted("warm-asynq", asynqRun, n/4), counted("warm-agentq", agentqRun, n/4)}
	sides := []side{counted("asynq", asynqRun, n), counted("agentq", agentqRun, n)}
	res := interleave(b, srv, rounds, warm, sides)
	ma, mg := median(res["asynq"]), median(res["agentq"])
	for _, s := range sides {
		detail("rounds (n=%d) %-7s %s  (connections opened: %s)", n, s.name+":", fmtRates(res[s.name]), fmtRates(conns[s.name]))
	}
	report("io-bound (%s HTTP, c=%d) asynq %.0f tasks/s  agentq %.0f tasks/s  ratio %.2f  (ideal %.0f tasks/s)",
		delay, c, ma, mg, mg/ma, float64(c)/delay.Seconds())
}

// runIOAgentq runs a worker at concurrency c with the HTTP agent ioAgent
// (config agents.io.http.url = the backend) over n prefilled tasks and
// returns tasks/s from the backend's first request to the n-th completion
// seen by asynq.
func runIOAgentq(ctx context.Context, srv *redistest.Server, be *ioBackend, c, n int) (float64, error) {
	rdb := newClient(srv)
	defer rdb.Close()
	if err := prefill(ctx, rdb, n, ioAgent); err != nil {
		return 0, err
	}
	cfg := agentqConfig(srv, c)
	cfg.Agents[ioAgent] = config.Agent{Name: ioAgent, HTTP: &config.HTTP{URL: be.srv.URL + "/run"}, Settings: cfg.Defaults.Clone()}
	w, err := worker.New(cfg, rdb, worker.WithLogger(discardLogger()))
	if err != nil {
		return 0, err
	}
	if err := pauseQueue(rdb); err != nil {
		return 0, err
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(rctx) }()
	if _, err := resumeWhenUp(ctx, rdb); err != nil {
		cancel()
		<-done
		return 0, err
	}
	end, werr := waitProcessed(ctx, rdb, int64(n), 2*time.Minute)
	cancel()
	if err := <-done; err != nil {
		return 0, err
	}
	if werr != nil {
		return 0, werr
	}
	if err := checkNoFailures(ctx, rdb); err != nil {
		return 0, err
	}
	return float64(n) / end.Sub(be.first.time()).Seconds(), nil
}

// runIOAsynq is runIOAgentq's twin: a plain asynq server at concurrency c
// whose handler POSTs the task's payload to the backend with hc and reads
// the reply, over the same prefilled tasks.
func runIOAsynq(ctx context.Context, srv *redistest.Server, be *ioBackend, hc *http.Client, c, n int) (float64, error) {
	rdb := newClient(srv)
	defer rdb.Close()
	if err := prefill(ctx, rdb, n, ioAgent); err != nil {
		return 0, err
	}
	url := be.srv.URL + "/run"
	s := asynq.NewServerFromRedisClient(rdb, asynqConfig(c, true))
	if err := pauseQueue(rdb); err != nil {
		return 0, err
	}
	if err := s.Start(asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		return postPayload(ctx, hc, url, t.Payload())
	})); err != nil {
		return 0, err
	}
	if _, err := resumeWhenUp(ctx, rdb); err != nil {
		s.Shutdown()
		return 0, err
	}
	end, werr := waitProcessed(ctx, rdb, int64(n), 2*time.Minute)
	s.Shutdown()
	if werr != nil {
		return 0, werr
	}
	if err := checkNoFailures(ctx, rdb); err != nil {
		return 0, err
	}
	return float64(n) / end.Sub(be.first.time()).Seconds(), nil
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
