package tasks

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

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

// Task is what a producer enqueues.
type Task struct {
	// ID is the task ID and idempotency key; zero: a random ID is generated.
	// A task ID that was already enqueued (and whose record is still retained)
	// is not enqueued again.
	ID            string
	Agent         string
	Action        string
	Params        json.RawMessage
	CorrelationID string
	// Queue is the asynq queue; zero: "default".
	Queue string
}

// EnqueueOption changes how one task is enqueued.
type EnqueueOption func(*enqueueOptions)

type enqueueOptions struct {
	processIn time.Duration
	processAt time.Time
}

// ProcessIn delays the task's first run by d.
func ProcessIn(d time.Duration) EnqueueOption { return func(o *enqueueOptions) { o.processIn = d } }

// ProcessAt runs the task no earlier than t.
func ProcessAt(t time.Time) EnqueueOption { return func(o *enqueueOptions) { o.processAt = t } }

// Result says what Enqueue did.
type Result struct {
	ID string `json:"id"`
	// Duplicate is true when a task with this ID already existed; nothing was enqueued.
	Duplicate bool  `json:"duplicate"`
	State     State `json:"state"`
}

// Client enqueues tasks. It is what other Go services import.
type Client struct {
	aq    *asynq.Client
	store *Store
}

// NewClient returns a client on rdb. Close releases asynq's side of it (rdb
// itself stays open: it belongs to the caller).
func NewClient(rdb redis.UniversalClient, opts ...StoreOption) *Client {
	return &Client{aq: asynq.NewClientFromRedisClient(rdb), store: NewStore(rdb, opts...)}
}

// Store returns the task store the client writes records to.
func (c *Client) Store() *Store { return c.store }

// Close releases the client.
func (c *Client) Close() error { return nil }

// NewID returns a random task ID.
func NewID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Enqueue puts t on its queue. With a caller-chosen ID it is idempotent: a
// repeat returns Duplicate and the existing task's state.
func (c *Client) Enqueue(ctx context.Context, t Task, opts ...EnqueueOption) (Result, error) {
	var o enqueueOptions
	for _, f := range opts {
		f(&o)
	}
	env := &Envelope{
		ID: t.ID, Agent: t.Agent, Action: t.Action, Params: t.Params,
		CorrelationID: t.CorrelationID, Queue: t.Queue, EnqueuedAt: c.store.Now().UTC(),
	}
	if env.ID == "" {
		env.ID = NewID()
	}
	if env.Queue == "" {
		env.Queue = DefaultQueue
	}
	if err := env.Validate(); err != nil {
		return Result{}, err
	}
	if t.ID != "" {
		if dup, st, err := c.existing(ctx, env.ID); err != nil || dup {
			return Result{ID: env.ID, Duplicate: dup, State: st}, err
		}
	}
	delay := o.processIn
	if !o.processAt.IsZero() {
		delay = time.Until(o.processAt)
	}
	state, event := StatePending, EventQueued
	if delay > 0 {
		state, event = StateScheduled, EventScheduled
	}
	err := c.EnqueueRun(ctx, env, delay)
	if errors.Is(err, ErrDuplicate) {
		_, st, _ := c.existing(ctx, env.ID)
		return Result{ID: env.ID, Duplicate: true, State: st}, nil
	}
	if err != nil {
		return Result{}, err
	}
	if _, err := c.store.Create(ctx, env, state, Event{Event: event, DelayMS: delay.Milliseconds()}); err != nil {
		// The task is queued; only its record is missing (the worker writes one).
		return Result{ID: env.ID, State: state}, nil
	}
	return Result{ID: env.ID, State: state}, nil
}

func (c *Client) existing(ctx context.Context, id string) (bool, State, error) {
	v, err := c.store.rdb.HGet(ctx, rkeys.Task(id), "state").Result()
	if errors.Is(err, redis.Nil) {
		return false, "", nil
	}
	if err != nil {
		return false, "", fmt.Errorf("tasks: check %s: %w", id, err)
	}
	return true, State(v), nil
}

// ErrDuplicate is returned by EnqueueRun when that run of the task is already queued.
var ErrDuplicate = errors.New("task run already enqueued")

// EnqueueRun puts env's current run (env.Run) on its queue after delay. The
// asynq task ID is derived from the run, so enqueueing the same run twice
// returns ErrDuplicate and queues nothing: restarts and requeues use it to
// stay idempotent across crashes.
func (c *Client) EnqueueRun(ctx context.Context, env *Envelope, delay time.Duration) error {
	payload, err := Encode(env)
	if err != nil {
		return err
	}
	if env.Queue == "" {
		env.Queue = DefaultQueue
	}
	opts := []asynq.Option{
		asynq.TaskID(env.AsynqID()), asynq.Queue(env.Queue), asynq.MaxRetry(asynqMaxRetry),
		asynq.Timeout(RunTimeout),
	}
	if delay > 0 {
		opts = append(opts, asynq.ProcessIn(delay))
	}
	_, err = c.aq.EnqueueContext(ctx, asynq.NewTask(TypeName, payload), opts...)
	if errors.Is(err, asynq.ErrTaskIDConflict) {
		return fmt.Errorf("%w: %s", ErrDuplicate, env.AsynqID())
	}
	if err != nil {
		return fmt.Errorf("tasks: enqueue %s: %w", env.ID, err)
	}
	return nil
}
