package delivery

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/budget"
	"github.com/agentq/agentq/internal/charts"
	"github.com/agentq/agentq/internal/limit"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redisx"
	"github.com/agentq/agentq/internal/restart"
	"github.com/agentq/agentq/internal/startstop"
	"github.com/agentq/agentq/internal/tracing"
	"github.com/agentq/agentq/internal/unmatched"
	"github.com/agentq/agentq/internal/usage"
	"github.com/agentq/agentq/resilience"
	"github.com/agentq/agentq/tasks"
)

// Executor is the asynq handler: it holds one delivery from start to
// answer (process.go reads top-down). This file builds it.
type Executor struct {
	log      *slog.Logger
	specs    map[string]*Spec
	rec      completer // the one way to the task record (record.go)
	dlq      *deadletter.Store
	restarts *restart.Scheduler
	rdb      redis.UniversalClient // where the tenants' lanes are (internal/broker)
	breakers *breaker.Breakers
	limiter  *limit.Limiter // provider limits (admit.go)
	lines    limitLines     // this process's waiting lines, per limits key
	pauses   pauseView      // pauses of pause-only keys seen by this process (admit.go)
	metrics  *Metrics
	// onFailure hears every failed call of an agent (the worker's
	// failure-rate alerts); never nil after New.
	onFailure func(agent string)
	workerID  string
	insp      *asynq.Inspector // nil: no superseded-run check (tests)
	classify  func(error) resilience.Verdict
	noGate    bool         // WithoutBreaker: skip Allow and Record
	tracer    trace.Tracer // attempt and run spans (attempt.go, end.go)
	traced    bool         // tracer's provider is tracing.Active
	// stopping is set when the worker starts shutting down: from then on a
	// call's canceled context is the shutdown's, not a task's cancel.
	stopping atomic.Bool
	// quick is p.quickStop, the func every call's context carries
	// (agent.WithQuickStop), made once rather than per call.
	quick func() bool
	// track notes a delivery in flight for the worker registry
	// (Heartbeat.Track); nil: not tracked.
	track func(delivery, id, agent, queue string) (done func())
	// charts counts attempts per minute for the console's charts
	// (internal/charts); nil: not counted.
	charts *charts.Counter
	// usage receives every attempt's usage: by default a usage.Recorder
	// adding it to the fleet's totals (withUsageSink); never nil after New.
	usage usage.Sink
	// meter reads, prices and counts the calls' usage (attempt.go).
	meter *meter
	// budgets are the tenants' and agents' budgets and tasks' own caps
	// (admit.go); nil: none (tests).
	budgets *budgets
	// acks holds quick successes' record writes until asynq's ack of
	// their delivery (record.go); nil: none ride it.
	acks *broker.Acks
	// successes counts the successes' writes, inline or with asynq's ack.
	successes *successes
	// children tells a child's parent how it ended (end.go); nil: no one.
	children ChildReporter
	// unmatched keeps the failed calls whose verdict was weak (attempt.go,
	// noteWeak); nil: none kept (tests without Redis).
	unmatched *unmatched.Store
}

// ChildReporter is the child tasks' side of the delivery (a
// *tasks.Client): it tells a child task's parent how the child ended
// (ReportChildEnd: the end recorded in the parent's child ends, and the
// parent resumed when that completes its children wait), and makes a
// children wait's children (PrepareChildren before the suspend's Waiting
// write, SpawnChildren after it).
type ChildReporter interface {
	ReportChildEnd(ctx context.Context, parent string, end tasks.ChildEnd) error
	PrepareChildren(ctx context.Context, parent *tasks.Envelope, run int, mode string, specs []tasks.ChildSpec) (bool, error)
	SpawnChildren(ctx context.Context, parent *tasks.Envelope, specs []tasks.ChildSpec) ([]string, error)
}

// Deps are what an Executor is built from: the worker's config and the
// stores and clients it shares with the worker's other components.
type Deps struct {
	Config   *config.Config
	Log      *slog.Logger
	Specs    map[string]*Spec
	RDB      redis.UniversalClient
	Batch    redisx.Runner // the group-committing batcher of admissions and bookkeeping
	Records  *record.Store
	DLQ      *deadletter.Store
	Restarts *restart.Scheduler
	Breakers *breaker.Breakers
	Metrics  *Metrics
	// Replicas is redis.wait_replicas (no success rides asynq's ack then).
	Replicas  int
	OnFailure func(agent string)
	WorkerID  string
	Inspector *asynq.Inspector
	Classify  func(error) resilience.Verdict
	NoGate    bool
	Tracer    trace.TracerProvider
	Track     func(delivery, id, agent, queue string) (done func())
	Charts    *charts.Counter
	Usage     usage.Sink
	// Children is told of every child task's end (nil: no one).
	Children ChildReporter
}

// New builds the Executor of d.
func New(d Deps) *Executor {
	p := &Executor{
		log: d.Log, specs: d.Specs, rdb: d.RDB, dlq: d.DLQ, restarts: d.Restarts, breakers: d.Breakers,
		metrics: d.Metrics, limiter: limit.New(d.RDB, limit.WithRunner(d.Batch)), onFailure: d.OnFailure,
		workerID: d.WorkerID, insp: d.Inspector, classify: d.Classify, noGate: d.NoGate,
		tracer: d.Tracer.Tracer(tracing.TracerName), traced: tracing.Active(d.Tracer),
		meter: newMeter(d.Config, d.Metrics), budgets: newBudgets(d.Config, d.RDB, d.Batch),
		track: d.Track, charts: d.Charts, usage: d.Usage, children: d.Children,
	}
	if p.onFailure == nil {
		p.onFailure = func(string) {}
	}
	if d.RDB != nil {
		p.unmatched = unmatched.NewStore(d.RDB)
	}
	p.quick = p.quickStop
	p.successes = &successes{log: d.Log, metrics: d.Metrics}
	p.acks = newAcks(d.RDB, d.Replicas, d.Log)
	p.rec = newCompleter(d.Records, p.acks, &p.stopping, p.successes)
	return p
}

// Acks holds quick successes' record writes until asynq's ack of their
// delivery; nil when none ride it (see record.go). The worker's asynq server
// and shutdown use it.
func (p *Executor) Acks() *broker.Acks { return p.acks }

// WithAcks is the base context of the worker's own asynq server: its
// deliveries' successes may ride asynq's ack.
func (p *Executor) WithAcks(ctx context.Context) context.Context { return withAcks(ctx, p.acks) }

// quickStop reports whether a call whose context was canceled was stopped
// because its task was canceled (asynq's CancelProcessing) rather than by
// the worker's shutdown: its exec agent then gets SIGKILL sooner
// (agent.WithQuickStop).
func (p *Executor) quickStop() bool { return !p.stopping.Load() }

// Stopping tells the Executor the worker is shutting down: from then on
// a call's canceled context is the shutdown's, not a task's cancel.
func (p *Executor) Stopping() { p.stopping.Store(true) }

// View is the record's view of task id (the deadline sweep reads it).
func (p *Executor) View(ctx context.Context, id string) (*record.View, error) {
	return p.rec.view(ctx, id)
}

// RegisterLimits records every limits key's configuration in Redis for
// inspection (inspector limits); retried in the background until it
// succeeds or ctx ends, since a worker may start while Redis is away.
func (p *Executor) RegisterLimits(ctx context.Context) {
	seen := map[string]bool{}
	var todo []*limitSpec
	for _, name := range slices.Sorted(maps.Keys(p.specs)) {
		if l := p.specs[name].limits; l != nil && !l.pauseOnly && !seen[l.key] {
			seen[l.key] = true
			todo = append(todo, l)
		}
	}
	for len(todo) > 0 {
		l := todo[0]
		err := p.limiter.Register(ctx, l.key, l.cfg)
		if err == nil {
			todo = todo[1:]
			continue
		}
		if errors.Is(err, context.Canceled) || startstop.Sleep(ctx, time.Second) != nil {
			return
		}
	}
}

// budgets is what the delivery knows of budgets.
type budgets struct {
	keeper *budget.Keeper
	tenant func(string) *config.Budget // config.Config.TenantBudget
}

// newBudgets returns the delivery's budgets: cfg's, and the keeper of
// tasks' own caps.
func newBudgets(cfg *config.Config, rdb redis.UniversalClient, run redisx.Runner) *budgets {
	return &budgets{keeper: budget.New(rdb, limit.WithRunner(run)), tenant: cfg.TenantBudget}
}

// limitLines are the worker's waiting lines, one per limits key.
type limitLines struct {
	mu    sync.Mutex
	lines map[string]*limitLine
}

// limitLine is one key's line: turn is held by the head (the one task
// that asks Redis), freed is signalled when a call of the key ends here.
type limitLine struct {
	turn  chan struct{}
	freed chan struct{}
}

// Provider pauses for HTTP and exec agents without limits (a pause-only
// limitSpec): a rate_limited reply that says when the key resets
// (Retry-After, the x-ratelimit-*/anthropic-ratelimit-* headers, an exec
// agent's ActionResponse retry_after and headers: limit.ExhaustedFor)
// pauses the agent's breaker key fleet-wide through the limiter, exactly
// as for an agent with limits, and does not count against the breaker
// (attempt.go). Admission stays cheap: each process reads a key's pause
// from Redis at most once per pauseCheckEvery and decides locally in
// between; its own pauses take effect at once. A Redis that does not
// answer admits (the breaker, not a pause, guards an unreachable store).

// pauseCheckEvery bounds how stale a process's view of a key's fleet-wide
// pause may be.
const pauseCheckEvery = time.Second

// pauseView is a process's view of the pauses of its pause-only keys.
type pauseView struct {
	mu   sync.Mutex
	keys map[string]pauseEntry
}

type pauseEntry struct {
	until   time.Time // local clock: end of the pause known (zero: none)
	checked time.Time // local clock: last read from Redis
}
