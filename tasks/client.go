package tasks

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redisx"
	"github.com/agentq/agentq/internal/rkeys"
)

// asynqMaxRetry is the asynq retry budget of every task. agentq decides
// itself when a run's attempts are used up (and dead-letters into its own
// store), so asynq's archive is never reached.
const asynqMaxRetry = 1 << 30

// RunTimeout is the asynq timeout of every run agentq enqueues: the
// deadline asynq puts on a delivery's context. asynq's own default (30
// minutes, when a task has neither a timeout nor a deadline) would cut a
// longer agent call and redeliver it forever; agentq enforces each agent's
// timeout itself, so asynq's only has to outlast the longest attempt.
const RunTimeout = 24 * time.Hour

// HandoffGrace is the part of RunTimeout kept for the work a worker does
// after an attempt's calls (recording the outcome, waiting out a Redis
// failover, scheduling a restart): the calls of one attempt may last at
// most MaxAttempt.
const HandoffGrace = time.Minute

// MaxAttempt is the longest an attempt's calls may last, the agent's
// timeout plus the timeouts of its fallback chain. The config refuses an
// agent whose chain is longer.
const MaxAttempt = RunTimeout - HandoffGrace

// Task is what a producer enqueues, in Go. The shapes of a task are two:
// the envelope (Envelope, what travels through the queue: Task's fields
// and the bookkeeping of its runs) and the view (View, what its record
// shows). The others are adapters of these: Request (Task as producers
// write it in JSON), internal/record's New and Seed (the envelope's fields
// the record keeps, built by newRecord and Envelope.Seed), internal/inspect's
// ListedTask (a View in a listing) and deadletter.Entry (a dead letter:
// the envelope and its view's history).
type Task struct {
	// ID is the task ID and idempotency key; zero: a random ID is generated.
	// A task ID that was already enqueued (and whose record is still
	// retained, or that is a dead letter) is not enqueued again. It may not
	// contain '#' (see ValidateID).
	ID            string
	Agent         string
	Action        string
	Params        json.RawMessage
	CorrelationID string
	// Queue is the asynq queue; zero: "default". Only the queues in a
	// worker's worker.queues are ever run: a task put on a queue no worker
	// serves waits there forever. The HTTP API and enqueuer refuse such a
	// queue (they know the config); a Client does so only when built
	// WithQueues.
	Queue string
	// Tenant is who the task is for: any string of at most MaxTenantLen
	// bytes without control, format or separator characters
	// (CheckTenant), with no
	// configuration needed; zero: the default tenant. Dispatch is fair
	// across the tenants of a queue (see Tenants in docs/DESIGN.md).
	// Every run of the task keeps it (retries, restarts, requeues).
	Tenant string
	// Priority orders the tenant's own tasks: PriorityHigh,
	// PriorityNormal or PriorityLow (case-sensitive; zero: normal). Every
	// run of the task keeps it.
	Priority string
	// Notify names webhooks (the config's webhooks block) to tell of the
	// task's events (its record keeps them). Only webhooks a worker has
	// configured are ever called; the HTTP API and enqueuer refuse a name
	// the config does not have and add the agent's agents.NAME.notify.
	Notify []string
	// Deadline is when the task gives up (zero: never; see also Within): a
	// run still waiting then never starts, a running attempt is stopped
	// (an exec agent's process group, an HTTP call), retries and restarts
	// due after it are not made, and the task ends dead_lettered with
	// reason deadline_exceeded and class timeout. It must be in the future
	// and after the first run is due (CheckDeadline). A requeue of the
	// dead letter runs without it.
	Deadline time.Time
	// MaxTokens caps the tokens all the task's attempts, retries and
	// restarts together may use (0: no cap): once their sum reached it,
	// the task is dead-lettered with reason budget_exhausted before its
	// next attempt. ≥ 0.
	MaxTokens int64
	// MaxCostUSD caps their cost in US dollars the same way (priced
	// models only; 0: no cap). ≥ 0.
	MaxCostUSD float64
}

// EnqueueOption changes how one task is enqueued.
type EnqueueOption func(*enqueueOptions)

type enqueueOptions struct {
	processIn time.Duration
	processAt time.Time
	within    time.Duration
}

// newEnqueueOptions applies opts.
func newEnqueueOptions(opts []EnqueueOption) enqueueOptions {
	var o enqueueOptions
	for _, f := range opts {
		f(&o)
	}
	return o
}

// delay is how long from now the first run waits: ProcessAt wins over
// ProcessIn.
func (o enqueueOptions) delay(now time.Time) time.Duration {
	if !o.processAt.IsZero() {
		return o.processAt.Sub(now)
	}
	return o.processIn
}

// ProcessIn delays the task's first run by d.
func ProcessIn(d time.Duration) EnqueueOption { return func(o *enqueueOptions) { o.processIn = d } }

// ProcessAt runs the task no earlier than t.
func ProcessAt(t time.Time) EnqueueOption { return func(o *enqueueOptions) { o.processAt = t } }

// Within gives the task (every task of an EnqueueMany) the deadline d from
// now (see Task.Deadline); a Task.Deadline earlier than that is kept.
// d must be positive.
func Within(d time.Duration) EnqueueOption { return func(o *enqueueOptions) { o.within = d } }

// deadline is the deadline of t enqueued at now with these options (zero:
// none), checked (CheckDeadline) against the delay of its first run.
func (o enqueueOptions) deadline(t Task, now time.Time) (time.Time, error) {
	dl := t.Deadline
	if o.within != 0 {
		if o.within < 0 {
			return time.Time{}, &ValidationError{"deadline", fmt.Sprintf("is %s from now, which is already past", o.within)}
		}
		if w := now.Add(o.within); dl.IsZero() || w.Before(dl) {
			dl = w
		}
	}
	if err := CheckDeadline(dl, now, o.delay(now)); err != nil {
		return time.Time{}, err
	}
	return dl, nil
}

// Result says what Enqueue did.
type Result struct {
	ID string `json:"id"`
	// Duplicate is true when a task with this ID already existed; nothing was enqueued.
	Duplicate bool  `json:"duplicate"`
	State     State `json:"state"`
}

// Client enqueues tasks. It is what other Go services import.
type Client struct {
	store *Store
	// runner runs the client's enqueue scripts: a group-committing
	// batcher (concurrent Enqueue calls share round trips; a lone call is
	// never held back: no linger) that waits for replicas when rep asks.
	runner *redisx.Batcher
	// queues, when not nil, are the only queues Enqueue accepts (WithQueues).
	queues map[string]bool
	// rep, when On, makes every write of an enqueue wait for replicas
	// (WithWaitReplicas).
	rep redisx.Replication
	// tracer starts the enqueue spans (WithTracerProvider) when traced
	// (its provider is tracing.Active).
	tracer trace.Tracer
	traced bool
	// insp is Cancel's asynq inspector, made on first use.
	insp     *asynq.Inspector
	inspOnce sync.Once
}

// ClientOption configures a Client. Every StoreOption is one (it configures
// the client's Store: WithRetention, …), and so is WithQueues.
type ClientOption interface{ applyClient(*Client) }

func (o StoreOption) applyClient(c *Client) { o(c.store) }

type clientOption func(*Client)

func (o clientOption) applyClient(c *Client) { o(c) }

// WithQueues makes Enqueue and EnqueueMany refuse a task whose queue is
// not one of queues (a *ValidationError naming field "queue" and the served
// queues): pass the worker.queues of the workers, so that a task for a
// queue nobody serves is refused rather than left waiting forever. No
// queues (the default): any queue is accepted.
func WithQueues(queues ...string) ClientOption {
	return clientOption(func(c *Client) {
		if len(queues) == 0 {
			c.queues = nil
			return
		}
		c.queues = make(map[string]bool, len(queues))
		for _, q := range queues {
			c.queues[q] = true
		}
	})
}

// WithWaitReplicas makes every enqueue wait until n replicas have its
// writes (Redis WAIT, on each master written, for at most timeout; zero →
// 1s): the task's queue entry and its record. An enqueue they do not reach
// in time fails with an error wrapping ErrNotReplicated (the enqueuer exits
// 1, the HTTP API answers 503); the task may still be on the master, so
// retry with the same caller ID. n ≤ 0: no waiting (the default). This is
// redis.wait_replicas and redis.wait_timeout of the config.
func WithWaitReplicas(n int, timeout time.Duration) ClientOption {
	return clientOption(func(c *Client) {
		c.replicate(redisx.Replication{Replicas: n, Timeout: timeout, OnShort: c.rep.OnShort})
	})
}

// WithShortReplication makes WithWaitReplicas best-effort: a write that
// reached fewer replicas than asked in time is reported to f (an error
// wrapping ErrNotReplicated) and counts as done. The worker uses it for
// the runs it schedules (a restart, a requeue), whose write is on the
// master, rather than stall while a replica is down. Give it after
// WithWaitReplicas.
func WithShortReplication(f func(error)) ClientOption {
	return clientOption(func(c *Client) {
		rep := c.rep
		rep.OnShort = f
		c.replicate(rep)
	})
}

// replicate makes rep the client's replication, and its store's unless the
// store was given its own runner (a worker's batcher, which waits itself).
func (c *Client) replicate(rep redisx.Replication) {
	c.rep = rep
	c.runner = redisx.NewBatcher(c.store.rdb, redisx.BatchOptions{Replication: rep, Linger: -1, Flushes: enqueueFlushes})
	c.store.runner = nil
	if rep.On() {
		c.store.runner = redisx.Replicated(c.store.rdb, rep)
	}
}

// ErrNotReplicated is wrapped by the error of an enqueue whose writes did
// not reach the replicas WithWaitReplicas asks for in time.
var ErrNotReplicated = redisx.ErrNotReplicated

// NewClient returns a client on rdb. rdb stays the caller's: the client
// holds no connection of its own, and the caller closes rdb when done.
func NewClient(rdb redis.UniversalClient, opts ...ClientOption) *Client {
	c := &Client{store: NewStore(rdb), runner: redisx.NewBatcher(rdb, redisx.BatchOptions{Linger: -1, Flushes: enqueueFlushes})}
	c.traceDefault()
	for _, o := range opts {
		o.applyClient(c)
	}
	c.store.build()
	return c
}

// CheckQueue returns a *ValidationError naming field "queue" when queue
// ("" is DefaultQueue) is not one of served; the message lists served,
// sorted. The HTTP API and enqueuer check tasks against the config's
// worker.queues with it.
func CheckQueue(queue string, served []string) error {
	if queue == "" {
		queue = DefaultQueue
	}
	if slices.Contains(served, queue) {
		return nil
	}
	names := slices.Sorted(slices.Values(served))
	return &ValidationError{"queue", fmt.Sprintf("is %q, which no worker serves (served queues: %s); a task there would never run",
		queue, strings.Join(names, ", "))}
}

// checkTask is what Enqueue and EnqueueMany check beyond env.Validate: the
// action and correlation ID (CheckText), a caller-chosen ID (caller) must
// pass ValidateID, and the queue must be
// served when the client was built WithQueues.
func (c *Client) checkTask(env *Envelope, caller bool) error {
	if err := env.checkText(); err != nil {
		return err
	}
	if caller {
		if err := ValidateID(env.ID); err != nil {
			return err
		}
	}
	if c.queues != nil && !c.queues[env.Queue] {
		return CheckQueue(env.Queue, slices.Collect(maps.Keys(c.queues)))
	}
	return nil
}

// Store returns the store of the client's task records.
func (c *Client) Store() *Store { return c.store }

// Close releases the client.
func (c *Client) Close() error { return nil }

// NewID returns a random task ID.
func NewID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// envelope is the envelope Enqueue and EnqueueMany put on the queue for t,
// enqueued at now: a random ID and DefaultQueue where t has none. It is
// checked (Validate, checkTask); an invalid task is an error.
func (c *Client) envelope(t Task, now time.Time) (*Envelope, error) {
	env := &Envelope{
		ID: t.ID, Agent: t.Agent, Action: t.Action, Params: t.Params,
		CorrelationID: t.CorrelationID, Queue: t.Queue, Tenant: t.Tenant, Priority: NormPriority(t.Priority),
		EnqueuedAt: now, Notify: t.Notify, MaxTokens: t.MaxTokens, MaxCostUSD: t.MaxCostUSD,
	}
	if env.ID == "" {
		env.ID = NewID()
	}
	if env.Queue == "" {
		env.Queue = DefaultQueue
	}
	if err := env.Validate(); err != nil {
		return nil, err
	}
	if err := c.checkTask(env, t.ID != ""); err != nil {
		return nil, err
	}
	return env, nil
}

// setDeadline sets env's deadline: t's with the options o, at now.
func (env *Envelope) setDeadline(o enqueueOptions, t Task, now time.Time) error {
	dl, err := o.deadline(t, now)
	if err != nil {
		return err
	}
	env.Deadline = 0
	if !dl.IsZero() {
		env.Deadline = dl.UnixMilli()
	}
	return nil
}

// indexDeadlines adds the tasks of envs that have a deadline to the
// deadline index (rkeys.Deadlines), where the workers' sweeper finds them
// (see package worker). Where the enqueue cannot do it in its own atomic
// step (a Cluster, EnqueueMany), it is done before the task is queued: an
// entry whose task was never enqueued is harmless (the sweeper drops an
// entry without a record), a task queued without its entry would be
// dead-lettered only when a worker takes it.
func (c *Client) indexDeadlines(ctx context.Context, envs ...*Envelope) error {
	var zs []redis.Z
	for _, env := range envs {
		if env.Deadline != 0 {
			zs = append(zs, redis.Z{Score: float64(env.Deadline), Member: env.ID})
		}
	}
	if len(zs) == 0 {
		return nil
	}
	if err := c.store.rdb.ZAdd(ctx, rkeys.Deadlines(), zs...).Err(); err != nil {
		return fmt.Errorf("tasks: enqueue %s: deadline index: %w", envs[0].ID, err)
	}
	return nil
}

// firstState is the state of a task whose first run is queued after
// delay: pending, or scheduled when delayed.
func firstState(delay time.Duration) State {
	if delay > 0 {
		return StateScheduled
	}
	return StatePending
}

// newRecord is the record of env, enqueued in state after delay.
func newRecord(env *Envelope, state State, delay time.Duration) record.New {
	return record.New{ID: env.ID, Seed: env.seed(), State: state, Delay: delay}
}

// seed is the part of env's record that enqueueing it writes.
func (env *Envelope) seed() record.Seed {
	return record.Seed{Agent: env.Agent, Action: env.Action, Queue: env.Queue, CorrelationID: env.CorrelationID,
		EnqueuedAt: env.EnqueuedAt, Deadline: env.DeadlineTime(), Notify: env.Notify,
		Tenant: env.Tenant, Priority: NormPriority(env.Priority), Parent: env.Parent, Root: env.Root}
}

// existing reports whether task id exists and its state: the state of its
// record or, when the record has expired but the task is still a dead
// letter, StateDeadLettered (a new task with that ID would overwrite the
// dead letter when it dies, and its requeue would clash with the new
// task's runs).
func (c *Client) existing(ctx context.Context, id string) (bool, State, error) {
	var st *redis.StringCmd
	var dead *redis.BoolCmd
	_, err := c.store.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		st = p.HGet(ctx, rkeys.Task(id), "state")
		dead = p.HExists(ctx, rkeys.DLQEntries(), id)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return false, "", fmt.Errorf("tasks: check %s: %w", id, err)
	}
	ok, state, err := existingState(st, dead)
	if err != nil {
		return false, "", fmt.Errorf("tasks: check %s: %w", id, err)
	}
	return ok, state, nil
}

// existingState reads the replies of existing's pipelined HGET and HEXISTS.
func existingState(st *redis.StringCmd, dead *redis.BoolCmd) (bool, State, error) {
	v, err := st.Result()
	switch {
	case err == nil:
		return true, State(v), nil
	case !errors.Is(err, redis.Nil):
		return false, "", err
	}
	ok, err := dead.Result()
	switch {
	case err != nil:
		return false, "", err
	case ok:
		return true, StateDeadLettered, nil
	}
	return false, "", nil
}

// ErrDuplicate is returned by EnqueueRun when that run of the task is already queued.
var ErrDuplicate = errors.New("task run already enqueued")

// EnqueueRun puts env's current run (env.Run) on its queue after delay. The
// asynq task ID is derived from the run, so enqueueing the same run twice
// returns ErrDuplicate and queues nothing: restarts and requeues use it to
// stay idempotent across crashes.
func (c *Client) EnqueueRun(ctx context.Context, env *Envelope, delay time.Duration) error {
	if env.Queue == "" {
		env.Queue = DefaultQueue
	}
	now := time.Now()
	t, err := asynqTask(env, now, delay)
	if err != nil {
		return err
	}
	added, err := broker.AsynqAdded(c.runRegistered(ctx, env.Queue, broker.RunCall(t, laneOf(env), now, delay, true)))
	switch {
	case err != nil:
		return fmt.Errorf("tasks: enqueue %s: %w", env.ID, err)
	case !added:
		return fmt.Errorf("%w: %s", ErrDuplicate, env.AsynqID())
	}
	return nil
}

// enqueueFlushes is how many of the client's pipelines may be in flight
// at once (redisx.BatchOptions.Flushes): two let Redis run one while the
// client writes the next (16 callers: one flush gave 12–14 % fewer
// enqueues, three about as many as two, sixteen, with little left to
// merge, a quarter fewer).
const enqueueFlushes = 2
