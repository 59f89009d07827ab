package worker

import (
	"context"
	"errors"
	"fmt"
	"github.com/agentq/agentq/internal/configx"
	"github.com/agentq/agentq/internal/delivery"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/charts"
	"github.com/agentq/agentq/internal/httpx"
	"github.com/agentq/agentq/internal/inspect"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redisx"
	"github.com/agentq/agentq/internal/restart"
	"github.com/agentq/agentq/internal/startstop"
	"github.com/agentq/agentq/internal/usage"
	"github.com/agentq/agentq/internal/wake"
	"github.com/agentq/agentq/resilience"
	"github.com/agentq/agentq/tasks"
)

// Option configures a Worker.
type Option func(*options)

type options struct {
	funcs    map[string]agent.Runner
	logger   *slog.Logger
	token    string
	listener net.Listener
	noGate   bool
	tp       trace.TracerProvider
	sink     usage.Sink
	// gaugesEvery is the fleet gauges' interval (zero: GaugesInterval).
	gaugesEvery time.Duration
}

// WithAgent registers a Go runner (for example an agent.Func) under name.
// Its settings come from the config's block for name, or the defaults.
func WithAgent(name string, r agent.Runner) Option {
	return func(o *options) { o.funcs[name] = r }
}

// WithLogger sets the logger; zero: slog.Default().
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithAPIToken sets the bearer token /api/v1/agents requires; zero: the
// AGENTQ_API_TOKEN environment variable (no token: open).
func WithAPIToken(tok string) Option { return func(o *options) { o.token = tok } }

// WithListener serves the ops endpoints on l instead of cfg.Worker.HTTPAddr.
func WithListener(l net.Listener) Option { return func(o *options) { o.listener = l } }

// WithoutBreaker turns the circuit-breaker gate off: no Allow before an
// attempt, no Record after it. For benchmarks that measure the gate's cost;
// a production worker keeps the gate.
func WithoutBreaker() Option { return func(o *options) { o.noGate = true } }

// WithTracerProvider traces the worker's runs and attempts with tp (build
// it with tracing.NewTracerProvider, whose ID generator makes each run's
// span the parent of its attempts' spans); zero: the global provider
// (otel.GetTracerProvider: a no-op unless tracing.Setup, or the program,
// installed one), as it is when New runs: a provider that is not
// tracing.Active (no-op) costs nothing.
func WithTracerProvider(tp trace.TracerProvider) Option { return func(o *options) { o.tp = tp } }

// withUsageSink sends every attempt's usage to s instead of the worker's
// own usage.Recorder (the fleet's totals in Redis): the worker's tests
// (unexported: usage.Sink is internal, a public option would name it). A
// sink that is also a startstop.Service (a *usage.Recorder) is started and
// stopped with the worker's other background components.
func withUsageSink(s usage.Sink) Option { return func(o *options) { o.sink = s } }

// withGaugesInterval computes the fleet's gauges every d instead of
// GaugesInterval (tests).
func withGaugesInterval(d time.Duration) Option { return func(o *options) { o.gaugesEvery = d } }

// Worker runs tasks from Redis until its context ends.
type Worker struct {
	cfg      *config.Config
	rdb      redis.UniversalClient
	log      *slog.Logger
	exec     *delivery.Executor
	breakers *breaker.Breakers
	metrics  *metrics
	token    string
	limiter  *httpx.Limiter // wrong tokens on /api/v1/agents, per client address
	ln       net.Listener
	addr     string
	specs    map[string]*delivery.Spec
	inflight sync.WaitGroup
	// waiter and dues let the asynq server wait for work instead of
	// polling for it (internal/broker).
	waiter *broker.Waiter
	dues   *broker.Dues
	// acks holds quick successes' record writes until asynq's ack of
	// their delivery, which runs them (delivery.Executor.Acks); nil: none
	// ride it.
	acks *broker.Acks
	// client is the Redis client of the worker's asynq server (asynqServer),
	// which fetches a queue's next run with each done (broker's prefetch.go).
	client *broker.AsynqClient
	// id is this worker's ID (host:pid): the holder of the fleet's claims.
	id       string
	insp     *asynq.Inspector
	restarts *restart.Scheduler
	alerts   *alerter
	// charts counts attempts per minute; usage takes the attempts' usage.
	charts *charts.Counter
	usage  usage.Sink
	// rec reads task records (which deferred tasks a breaker's close
	// wakes, the deadline sweep).
	rec *record.Store
	// loops are the background services (services.go).
	loops
}

// newOptions applies opts over the defaults: slog.Default, the token in
// AGENTQ_API_TOKEN, the global tracer provider.
func newOptions(opts []Option) options {
	o := options{funcs: map[string]agent.Runner{}}
	for _, f := range opts {
		f(&o)
	}
	if o.logger == nil {
		o.logger = slog.Default()
	}
	if o.token == "" {
		o.token = os.Getenv("AGENTQ_API_TOKEN")
	}
	if o.tp == nil {
		o.tp = otel.GetTracerProvider()
	}
	return o
}

// New builds a worker on rdb (which stays the caller's to close). It
// returns an error naming the agent when an agent cannot be built.
func New(cfg *config.Config, rdb redis.UniversalClient, opts ...Option) (*Worker, error) {
	o := newOptions(opts)
	specs, err := delivery.BuildSpecs(cfg, o.funcs)
	if err != nil {
		return nil, err
	}
	// The operator's classifier.rules come first for every failure.
	custom, err := cfg.ClassifierRules()
	if err != nil {
		return nil, err
	}
	classifier := resilience.Classifier{Custom: custom}
	m := newMetrics(slices.Collect(maps.Keys(specs)), configx.Fair(cfg))
	host, _ := os.Hostname()
	// One group-committing batcher: concurrent tasks' admissions and
	// bookkeeping writes share pipelined round trips (redisx.Batcher, in
	// internal/redisx).
	// With redis.wait_replicas, every write a task's outcome depends on
	// (its record, its dead letter, a restart's enqueue) waits for the
	// replicas, best-effort: a replica that does not answer in time is
	// logged, and the outcome, which is on the master, stands.
	rep := redisx.Replication{Replicas: cfg.Redis.WaitReplicas, Timeout: cfg.Redis.WaitTimeout,
		OnShort: shortReplication(m, o.logger)}
	batch := redisx.NewBatcher(rdb, redisx.BatchOptions{Replication: rep})
	client := tasks.NewClient(rdb, tasks.WithRetention(cfg.History.Retention),
		tasks.WithWaitReplicas(rep.Replicas, rep.Timeout), tasks.WithShortReplication(rep.OnShort))
	w := &Worker{
		cfg: cfg, rdb: rdb, log: o.logger, metrics: m, token: o.token, ln: o.listener,
		limiter: httpx.NewLimiter(httpx.LimiterOptions{Logger: o.logger}), specs: specs,
		dues: broker.NewDues(cfg.Worker.PollInterval*wake.BackstopFactor, nil), id: fmt.Sprintf("%s:%d", host, os.Getpid()),
		rec: record.NewStore(rdb, record.WithRetention(cfg.History.Retention), record.WithRunner(batch),
			record.WithAckRunner(ackRunner(batch, cfg.Worker.Concurrency))),
		breakers: breaker.New(rdb, breaker.WithLogger(o.logger), breaker.WithRunner(batch)),
		insp:     asynq.NewInspectorFromRedisClient(rdb), restarts: restart.NewScheduler(rdb, client),
		alerts: newAlerter(rdb, cfg.Alerts.Threshold, cfg.Alerts.Window, cfg.Alerts.WebhookURL, o.logger, m),
		charts: charts.NewCounter(rdb, charts.CounterOptions{Logger: o.logger}), usage: o.sink,
	}
	if w.usage == nil {
		w.usage = usage.NewRecorder(rdb, usage.RecorderOptions{
			Retention: cfg.Usage.Retention, MaxSeries: cfg.Usage.MaxSeries, Logger: o.logger})
	}
	if err := w.newLoops(client, o.noGate, o.gaugesEvery); err != nil {
		return nil, err
	}
	w.exec = delivery.New(delivery.Deps{
		Config: cfg, Log: o.logger, Specs: specs, RDB: rdb, Batch: batch, Records: w.rec,
		DLQ:      deadletter.NewStore(rdb, deadletter.WithWaitReplicas(rep.Replicas, rep.Timeout, rep.OnShort)),
		Restarts: w.restarts, Breakers: w.breakers, Metrics: m.delivery, Replicas: rep.Replicas,
		OnFailure: w.alerts.failure, WorkerID: w.id, Inspector: w.insp, Classify: classifier.Classify,
		NoGate: o.noGate, Tracer: o.tp, Track: w.hb.Track, Charts: w.charts, Usage: w.usage, Children: client,
	})
	w.acks = w.exec.Acks()
	return w, nil
}

// shortReplication reports a write that reached fewer replicas than
// redis.wait_replicas: counted every time, logged at most every
// shortLogEvery (a dead replica makes every write short).
func shortReplication(m *metrics, log *slog.Logger) func(error) {
	var last atomic.Int64
	return func(err error) {
		m.shortReplication.Inc()
		now := time.Now().UnixNano()
		if prev := last.Load(); now-prev >= int64(shortLogEvery) && last.CompareAndSwap(prev, now) {
			log.Warn("write not on enough replicas (redis.wait_replicas); the outcome stands on the master",
				"err", err, "next_log_in", shortLogEvery.String())
		}
	}
}

// shortLogEvery bounds how often a short replication is logged.
const shortLogEvery = 10 * time.Second

// Agents lists the agents this worker runs.
func (w *Worker) Agents() []string {
	out := make([]string, 0, len(w.specs))
	for n := range w.specs {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Addr is the address the ops endpoints listen on ("" when off); valid once Run has started them.
func (w *Worker) Addr() string { return w.addr }

// Handler returns the asynq handler (for embedding agentq's pipeline in
// an asynq server of your own).
func (w *Worker) Handler() asynq.Handler {
	return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		w.inflight.Add(1)
		defer w.inflight.Done()
		return w.exec.ProcessTask(ctx, t)
	})
}

// ackRunner is what a success riding asynq's done runs through
// (record.WithAckRunner): the worker's batcher when it runs tasks
// concurrently, so that their acks share round trips (measured on 2 cores,
// no-op tasks at concurrency 50: Redis CPU per task −17 %, the worker's
// −30 %); one round trip each (nil) when it runs one at a time, where a
// batcher's wait for company would only hold the one slot.
func ackRunner(batch *redisx.Batcher, concurrency int) redisx.Runner {
	if concurrency <= 1 {
		return nil
	}
	return batch
}

// RegistryID is this worker's ID in the worker registry (inspect.Workers).
func (w *Worker) RegistryID() string { return w.hb.ID() }

// Run processes tasks until ctx ends, then shuts down gracefully: it stops
// taking work, lets in-flight tasks finish for up to shutdown_timeout, puts
// the rest back on their queue without using an attempt, and stops their
// agents (killing exec process groups). Its background components (the ops
// server, the breakers' flush loop and subscription, the wake-up and
// restart-repair loops, the alert sender, health probers, the charts'
// attempt counter, the fleet gauges, the usage totals' recorder) share one
// lifecycle (internal/startstop): started in order before the first task,
// stopped in reverse after the last.
func (w *Worker) Run(ctx context.Context) error {
	if err := w.rdb.Ping(ctx).Err(); err != nil {
		if w.ln != nil {
			_ = w.ln.Close() // Run owns the listener it was given, on every return
		}
		return fmt.Errorf("worker: redis at %s unreachable: %w", w.cfg.Redis.Where(), err)
	}
	ops, err := w.listenOps()
	if err != nil {
		return err
	}
	baseCtx, cancelBase := context.WithCancel(w.exec.WithAcks(context.WithoutCancel(ctx)))
	defer cancelBase()
	// The fleet looks every poll interval (wake.Checks); each idle worker
	// blocks for much longer, and only a Redis failure's pause is short.
	w.waiter = broker.NewWaiter(w.rdb, w.queues(), w.cfg.Worker.PollInterval*wake.BackstopFactor, w.id+":"+tasks.NewID()).
		PauseOnFailure(w.cfg.Worker.PollInterval)
	srv := w.asynqServer(baseCtx)
	services := w.components(ops)
	startstop.StartAll(context.WithoutCancel(ctx), services...)
	if err := srv.Start(w.Handler()); err != nil {
		startstop.StopAll(services...) // and the ops server, which closes its listener
		return fmt.Errorf("worker: start: %w", err)
	}
	w.log.Info("worker started", "concurrency", w.cfg.Worker.Concurrency, "agents", w.Agents(), "ops_addr", w.addr)
	<-ctx.Done()
	w.log.Info("worker shutting down", "shutdown_timeout", w.cfg.Worker.ShutdownTimeout.String())
	w.exec.Stopping()                         // canceled calls are the shutdown's from now on
	w.client.StopFetching()                   // no more runs fetched with a done: the processor takes no more
	w.waiter.Stop(context.WithoutCancel(ctx)) // end an idle wait at once
	srv.Shutdown()                            // stops dequeuing, waits for in-flight tasks, requeues the rest
	w.putBackFetched(context.WithoutCancel(ctx))
	cancelBase() // stop agents still running (their tasks are already back on the queue)
	w.awaitAgents()
	if n := w.acks.Drain(context.WithoutCancel(ctx)); n > 0 {
		w.log.Info("recorded successes whose deliveries asynq left unacknowledged at shutdown", "tasks", n)
	}
	startstop.StopAll(services...)
	w.log.Info("worker stopped")
	return nil
}

// putBackFetched puts back the runs fetched with a done that asynq's
// processor did not take before it stopped (broker's prefetch.go).
func (w *Worker) putBackFetched(ctx context.Context) {
	n, err := w.client.Drain(ctx)
	if n > 0 {
		w.log.Info("put back runs fetched for this worker and not started", "tasks", n)
	}
	if err != nil {
		w.log.Warn("could not put back runs fetched for this worker; their leases' expiry recovers them", "err", err)
	}
}

// components are the worker's background components, in start order.
func (w *Worker) components(ops startstop.Service) []startstop.Service {
	out := []startstop.Service{
		ops, w.breakers, w.hb, w.recovery, w.charts, w.gauges,
		w.listener, w.checks,
		startstop.Func(w.exec.RegisterLimits),
		w.repairer, w.sweeper, w.tenants, w.kids,
		w.alerts,
	}
	for _, p := range w.probers {
		out = append(out, p)
	}
	if svc, ok := w.usage.(startstop.Service); ok {
		out = append(out, svc)
	}
	if w.hooks != nil {
		out = append(out, w.hooks)
	}
	if w.sched != nil {
		out = append(out, w.sched)
	}
	return out
}

// asynqServer is the asynq server that delivers tasks to the pipeline;
// baseCtx is the parent of every task's context (cancelled to stop agents).
// It runs on a broker.AsynqClient: after a round of empty queues its
// processor waits on the worker's Waiter (which is why asynq's own sleep
// after an empty round, TaskCheckInterval, is a millisecond), and its
// forwarder asks Redis only when a delayed task may be due.
func (w *Worker) asynqServer(baseCtx context.Context) *asynq.Server {
	queues := serveQueues(w.cfg)
	rdb := broker.NewAsynqClient(w.rdb, w.waiter, w.dues, len(queues), func(err error) {
		w.log.Warn("cannot wake idle workers for requeued tasks; they find them within worker.poll_interval", "err", err)
	})
	rdb.OnWait = func(c broker.Cause) { w.metrics.idleWaits.WithLabelValues(string(c)).Inc() }
	rdb.Acks = w.acks
	rdb.Fair = configx.Fair(w.cfg)
	rdb.Prefetch = true // the client fetches only for a server of one queue
	w.client = rdb
	return asynq.NewServerFromRedisClient(rdb, asynq.Config{
		Concurrency:              w.cfg.Worker.Concurrency,
		Queues:                   queues,
		BaseContext:              func() context.Context { return baseCtx },
		RetryDelayFunc:           delivery.RetryDelay,
		IsFailure:                delivery.IsFailure,
		ShutdownTimeout:          w.cfg.Worker.ShutdownTimeout,
		TaskCheckInterval:        asynqEmptySleep,
		DelayedTaskCheckInterval: w.cfg.Worker.ForwardInterval,
		Logger:                   asynqLogger{w.log},
		LogLevel:                 asynq.WarnLevel,
	})
}

// serveQueues are the queues a worker serves, with their priorities.
func serveQueues(cfg *config.Config) map[string]int {
	if len(cfg.Worker.Queues) == 0 {
		return map[string]int{tasks.DefaultQueue: 1}
	}
	return cfg.Worker.Queues
}

// asynqEmptySleep is asynq's sleep after an empty dequeue round, which
// follows the Waiter's wait (asynq sleeps from half of it to 1.5×).
const asynqEmptySleep = time.Millisecond

// awaitAgents waits, after shutdown cancelled the agents still running,
// for their handlers to return: an exec agent's process group gets SIGTERM
// and, agent.DefaultKillGrace later, SIGKILL, then its handler records the
// put-back (tasks.HandoffGrace bounds that hand-off, as for any attempt).
// It returns as soon as they have; a Go agent that ignores its context is
// left behind after that bound, and said so.
func (w *Worker) awaitAgents() {
	done := make(chan struct{})
	go func() { w.inflight.Wait(); close(done) }()
	bound := agent.DefaultKillGrace + tasks.HandoffGrace
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		w.log.Error("agents did not stop after their cancellation", "waited", bound.String())
	}
}

// Timeouts of the ops server: a client that trickles its headers or body,
// or never reads the reply, cannot hold a connection (and a goroutine)
// open. WriteTimeout leaves room for /api/v1/agents, whose Redis reads are
// bounded by the request's context.
const (
	opsReadHeaderTimeout = 5 * time.Second
	opsReadTimeout       = 10 * time.Second
	opsWriteTimeout      = 30 * time.Second
	opsIdleTimeout       = 60 * time.Second
	opsMaxHeaderBytes    = 16 << 10
)

// newOpsServer is the ops endpoints' http.Server, every timeout set.
func newOpsServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: opsReadHeaderTimeout,
		ReadTimeout:       opsReadTimeout,
		WriteTimeout:      opsWriteTimeout,
		IdleTimeout:       opsIdleTimeout,
		MaxHeaderBytes:    opsMaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// opsService serves the ops endpoints on its listener from Start to Stop.
// A Serve that fails (not by Stop) is logged at error level with the
// address: the worker keeps running tasks, but its health endpoints are
// gone. Stop shuts the server down (within shutdown_timeout, then closes
// it) and closes the listener.
type opsService struct {
	startstop.Loop
	w   *Worker
	ln  net.Listener // nil: no ops server
	srv *http.Server
}

// listenOps opens the ops server's listener: the WithListener one, or one
// on worker.http_addr (no server when neither is set).
func (w *Worker) listenOps() (*opsService, error) {
	o := &opsService{w: w, ln: w.ln}
	if o.ln == nil && w.cfg.Worker.HTTPAddr != "" {
		ln, err := net.Listen("tcp", w.cfg.Worker.HTTPAddr)
		if err != nil {
			return nil, fmt.Errorf("worker: listen on worker.http_addr %s: %w", w.cfg.Worker.HTTPAddr, err)
		}
		o.ln = ln
	}
	if o.ln != nil {
		w.addr = o.ln.Addr().String()
		o.srv = newOpsServer(w.OpsHandler(), w.log)
	}
	return o, nil
}

func (o *opsService) Start(ctx context.Context) {
	if o.ln == nil {
		return
	}
	o.Go(ctx, func(context.Context) {
		if err := o.srv.Serve(o.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			o.w.log.Error("ops server failed: /healthz, /readyz, /metrics and /api/v1/agents are down", "addr", o.w.addr, "err", err)
		}
	})
}

func (o *opsService) Stop() {
	if o.ln == nil {
		return
	}
	sctx, cancel := context.WithTimeout(context.Background(), o.w.cfg.Worker.ShutdownTimeout)
	defer cancel()
	if err := o.srv.Shutdown(sctx); err != nil {
		_ = o.srv.Close()
	}
	_ = o.ln.Close() // Serve may have failed before Shutdown could close it; or it never started
	o.Loop.Stop()
}

// OpsHandler serves /healthz, /readyz, /metrics and /api/v1/agents, behind
// the API's browser protections (httpx.Guard): a request whose Origin is
// not the server's own is refused (403 forbidden), and, when the server is
// bound to a loopback address, so is one whose Host is not a loopback name
// or address with its port (DNS rebinding). /api/v1/agents counts wrong
// bearer tokens per client address (httpx.Limiter: 429 too_many_requests
// with Retry-After after 10 within a minute).
func (w *Worker) OpsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(rw http.ResponseWriter, _ *http.Request) {
		writeJSON(rw, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(rw http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), time.Second)
		defer cancel()
		if err := w.rdb.Ping(ctx).Err(); err != nil {
			// The raw error (addresses, server replies) goes to the log, not
			// to this unauthenticated endpoint.
			w.log.Warn("readyz: redis ping failed", "err", err)
			writeJSON(rw, http.StatusServiceUnavailable, map[string]string{"status": "not ready", "error": "redis unavailable"})
			return
		}
		writeJSON(rw, http.StatusOK, map[string]string{"status": "ready"})
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(w.metrics.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /api/v1/agents", func(rw http.ResponseWriter, r *http.Request) {
		switch res, wait := w.limiter.Bearer(r, w.token, "GET /api/v1/agents"); res {
		case httpx.AuthBlocked:
			rw.Header().Set("Retry-After", strconv.FormatInt(httpx.RetryAfterSeconds(wait), 10))
			writeJSON(rw, http.StatusTooManyRequests, httpx.ErrorBody{Code: httpx.CodeTooManyRequests,
				Error: "too many wrong bearer tokens from your address: wait before trying again"})
			return
		case httpx.AuthMissing, httpx.AuthWrong:
			writeJSON(rw, http.StatusUnauthorized, map[string]string{"code": "unauthorized", "error": "missing or wrong bearer token"})
			return
		}
		out, err := w.agentSummaries(r.Context())
		if err != nil {
			w.log.Warn("/api/v1/agents: reading breakers failed", "err", err)
			writeJSON(rw, http.StatusServiceUnavailable, map[string]string{"code": "unavailable", "error": "redis unavailable"})
			return
		}
		writeJSON(rw, http.StatusOK, map[string]any{"agents": out})
	})
	return httpx.Guard(mux, w.addr, func(rw http.ResponseWriter, _ *http.Request, why httpx.Refusal) {
		writeJSON(rw, http.StatusForbidden, httpx.ErrorBody{Code: "forbidden", Error: why.Msg})
	})
}

// agentSummaries lists the worker's agents through inspect.AgentRefsOf,
// the builder the HTTP API and the console use too: the settings shown are
// config.Config.Agent's, the ones buildSpec ran the agents with.
func (w *Worker) agentSummaries(ctx context.Context) ([]inspect.AgentSummary, error) {
	return inspect.Summaries(ctx, w.rdb, w.breakers, inspect.AgentRefsOf(w.cfg, w.Agents()))
}

// CheckBearer reports whether r carries "Authorization: Bearer <token>",
// compared in constant time. An empty token admits every request.
func CheckBearer(r *http.Request, token string) bool { return httpx.CheckBearer(r, token) }

func writeJSON(rw http.ResponseWriter, code int, v any) { httpx.WriteJSON(rw, code, v) }

// asynqLogger routes asynq's logs through slog.
type asynqLogger struct{ l *slog.Logger }

func (a asynqLogger) Debug(args ...any) { a.l.Debug(fmt.Sprint(args...), "component", "asynq") }
func (a asynqLogger) Info(args ...any)  { a.l.Info(fmt.Sprint(args...), "component", "asynq") }
func (a asynqLogger) Warn(args ...any)  { a.l.Warn(fmt.Sprint(args...), "component", "asynq") }
func (a asynqLogger) Error(args ...any) { a.l.Error(fmt.Sprint(args...), "component", "asynq") }
func (a asynqLogger) Fatal(args ...any) {
	a.l.Error(fmt.Sprint(args...), "component", "asynq", "fatal", true)
}
