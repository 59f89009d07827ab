package record

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/amount"
	"github.com/agentq/agentq/internal/durx"
	"github.com/agentq/agentq/internal/redisx"
	"github.com/agentq/agentq/internal/rkeys"
)

// DefaultRetention is how long a task's record and history are kept after
// its last event when no retention is configured.
const DefaultRetention = 7 * 24 * time.Hour

// ErrNotFound is returned when a task has no record (never enqueued, or its
// history outlived the retention period).
var ErrNotFound = errors.New("task not found")

// Store reads and writes task records: a Redis hash and a Redis list of
// JSON events per task, under one hash tag, expiring after the retention
// counted from the last event.
type Store struct {
	rdb       redis.UniversalClient
	retention time.Duration
	now       func() time.Time
	runner    redisx.Runner // WithRunner's, or redisx.Direct
	acks      redisx.Runner // WithAckRunner's, or redisx.Direct
	// cluster: rdb is a Redis Cluster client, whose scripts cannot add a
	// task to the webhooks' due set (another slot): the store does it
	// right after (see outboxKeys).
	cluster bool
}

// Option configures a Store.
type Option func(*Store)

// WithRetention sets how long records live after their last event; zero
// keeps DefaultRetention.
func WithRetention(d time.Duration) Option {
	return func(s *Store) {
		if d > 0 {
			s.retention = d
		}
	}
}

// WithClock sets the clock used to stamp events (tests).
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// WithRunner sends the writes through r, e.g. a group-committing batcher
// shared by many goroutines (each call still returns once its write is
// applied); nil keeps one round trip per call.
func WithRunner(r redisx.Runner) Option {
	return func(s *Store) {
		if r != nil {
			s.runner = r
		}
	}
}

// WithAckRunner sends ApplyAcked's script (a success's record write with
// asynq's done) through r, e.g. the worker's group-committing batcher:
// concurrent deliveries' acks then share round trips. nil keeps one round
// trip per ack, like asynq's own done: what a worker that runs one task at
// a time wants, since a batcher's wait for company that never comes would
// hold its only slot.
func WithAckRunner(r redisx.Runner) Option { return func(s *Store) { s.acks = r } }

// NewStore returns a Store on rdb.
func NewStore(rdb redis.UniversalClient, opts ...Option) *Store {
	s := &Store{rdb: rdb, retention: DefaultRetention, now: time.Now}
	for _, o := range opts {
		o(s)
	}
	if s.runner == nil {
		s.runner = redisx.Direct(rdb)
	}
	if s.acks == nil {
		s.acks = redisx.Direct(rdb)
	}
	_, s.cluster = rdb.(*redis.ClusterClient)
	return s
}

// Now is the store's clock.
func (s *Store) Now() time.Time { return s.now() }

// Retention is how long records live after their last event.
func (s *Store) Retention() time.Duration { return s.retention }

// Client is the store's Redis client.
func (s *Store) Client() redis.UniversalClient { return s.rdb }

// stamp is at in UTC, or now when at is zero.
func (s *Store) stamp(at time.Time) time.Time {
	if at.IsZero() {
		return s.now().UTC()
	}
	return at.UTC()
}

// lifetime is how long a record whose last event is ev lives: the
// retention plus the event's delay (a scheduled first run, a retry, a
// deferral or a restart due later), saturated so that a delay near the
// largest duration never wraps to a negative lifetime.
func (s *Store) lifetime(ev *Event) time.Duration {
	if ev == nil {
		return s.retention
	}
	return durx.Add(s.retention, durx.Millis(ev.DelayMS))
}

// refreshSlack is how much of a record's lifetime may be missing before a
// write refreshes it: 1% of the lifetime, at most a minute. A quick task's
// writes then find the lifetime Create gave its record moments before
// still whole and spare Redis the EXPIREs; its record lives at least 99%
// of the retention after its last event.
func refreshSlack(lifetime time.Duration) time.Duration {
	return min(lifetime/100, time.Minute)
}

// keys are the record's and history's keys of task id.
func keys(id string) []string { return []string{rkeys.Task(id), rkeys.TaskHistory(id)} }

// OutboxLifetime is how long a task's webhook outbox lives after its last
// event: long enough for any webhook's max_age.
const OutboxLifetime = 30 * 24 * time.Hour

// outboxKeys are keys(id) and the keys rec_outbox writes: the task's
// webhook outbox and, but on a Redis Cluster (another slot), the webhooks'
// due set.
func (s *Store) outboxKeys(id string) []string {
	if s.cluster {
		return []string{rkeys.Task(id), rkeys.TaskHistory(id), rkeys.TaskOutbox(id)}
	}
	return []string{rkeys.Task(id), rkeys.TaskHistory(id), rkeys.TaskOutbox(id), rkeys.WebhooksDue()}
}

// outboxed is the second step of a write that put an event in task id's
// webhook outbox on a Redis Cluster (flag: the script's outboxed reply,
// 1 when it did): the task is made due now in the webhooks' due set
// (scored by the time, as the script does; LT: an earlier score stays). When
// this step is lost (the process dies between the two, Redis fails), the
// webhook deliverer's repair finds the outbox (webhook.Deliverer). Its
// error is not the write's: the write was applied.
func (s *Store) outboxed(ctx context.Context, id string, flag any) {
	if n, _ := flag.(int64); n == 1 && s.cluster {
		score := float64(s.now().UnixMilli())
		_ = s.rdb.ZAddArgs(ctx, rkeys.WebhooksDue(), redis.ZAddArgs{LT: true, Members: []redis.Z{{Score: score, Member: id}}}).Err()
	}
}

// reply splits a record script's reply into its code and the rest.
func reply(v any, err error) (Code, []any, error) {
	if err != nil {
		return 0, nil, err
	}
	switch r := v.(type) {
	case int64:
		return Code(r), nil, nil
	case []any:
		if len(r) > 0 {
			if c, ok := r[0].(int64); ok {
				return Code(c), r[1:], nil
			}
		}
	}
	return 0, nil, fmt.Errorf("record: unexpected script reply %v", v)
}

// Exists reports whether task id has a record.
func (s *Store) Exists(ctx context.Context, id string) (bool, error) {
	res, err := s.pipeline(ctx, []redisx.Call{{Cmd: []any{"exists", rkeys.Task(id)}}})
	if err == nil {
		err = firstErr(res)
	}
	if err != nil {
		return false, err
	}
	n, _ := res[0].Val.(int64)
	return n == 1, nil
}

// RunState is what a redelivery needs to know of its task's record.
type RunState struct {
	// Exists is false when the task has no record (never written, or expired).
	Exists bool
	State  State
	Run    int
	// NextAttemptAt is when the next attempt is due (zero: no retry pending).
	NextAttemptAt time.Time
}

// Ended reports whether run has ended in the record: the record is at run
// and in a terminal state, or the task has been canceled (which ends every
// run of it).
func (r RunState) Ended(run int) bool {
	return r.Exists && (r.State == StateCanceled || (r.Run == run && r.State.Terminal()))
}

// RunState reads task id's state, run and next attempt time in one round trip.
func (s *Store) RunState(ctx context.Context, id string) (RunState, error) {
	v, err := s.rdb.HMGet(ctx, rkeys.Task(id), FieldState, FieldRun, FieldNextAttemptAt).Result()
	if err != nil {
		return RunState{}, fmt.Errorf("record: state of %s: %w", id, err)
	}
	str := func(i int) (string, bool) { x, ok := v[i].(string); return x, ok }
	var r RunState
	if st, ok := str(0); ok {
		r.Exists, r.State = true, State(st)
	}
	if run, ok := str(1); ok {
		r.Run, _ = strconv.Atoi(run)
	}
	if ms, ok := str(2); ok {
		if n, err := strconv.ParseInt(ms, 10, 64); err == nil {
			r.NextAttemptAt = time.UnixMilli(n)
		}
	}
	return r, nil
}

// View is a task as `inspector task` and the HTTP API show it (stable JSON).
type View struct {
	ID     string `json:"id"`
	Agent  string `json:"agent"`
	Action string `json:"action"`
	State  State  `json:"state"`
	// WaitingFor is what holds the task while it waits (WaitingBudget,
	// WaitingSignal, …), WaitingDetail which one (the budget, the breaker,
	// the signal …), and NextAttemptAt (RFC 3339) when its next attempt or
	// run is due; all absent when nothing holds it (active, ended, pending
	// with a free way to a worker). Get explains them; Views (a listing)
	// does not.
	WaitingFor    string `json:"waiting_for,omitempty"`
	WaitingDetail string `json:"waiting_detail,omitempty"`
	NextAttemptAt string `json:"next_attempt_at,omitempty"`
	Attempts      int    `json:"attempts"`
	Restarts      int    `json:"restarts"`
	ErrorClass    string `json:"error_class"`
	// ClassifiedBy is the kind of evidence that decided ErrorClass
	// (rule, structure, status, text, model, default); omitted when empty.
	ClassifiedBy  string `json:"classified_by,omitempty"`
	Error         string `json:"error"`
	Queue         string `json:"queue,omitempty"`
	CorrelationID string `json:"correlation_id,omitempty"`
	Run           int    `json:"run"`
	EnqueuedAt    string `json:"enqueued_at,omitempty"`
	UpdatedAt     string `json:"updated_at,omitempty"`
	// Result is the agent's result data once the task succeeded.
	Result json.RawMessage `json:"result,omitempty"`
	// Reason is, for a dead-lettered task, why (not_retryable,
	// restarts_exhausted, deadline_exceeded, …).
	Reason string `json:"reason,omitempty"`
	// Seq is the sequence number of the task's last event (history or
	// output); not in the JSON.
	Seq int64 `json:"-"`
	// Deadline is when the task gives up (RFC 3339), when it has one.
	Deadline string `json:"deadline,omitempty"`
	// Notify names the webhooks told of the task's events.
	Notify []string `json:"notify,omitempty"`
	// Tenant is who the task is for (absent: the default tenant).
	Tenant string `json:"tenant,omitempty"`
	// Priority is the task's priority: "high", "normal" or "low" (Get
	// shows "normal" for a record without one).
	Priority string `json:"priority,omitempty"`
	// CanceledAt and CancelReason are set once the task is canceled.
	CanceledAt   string `json:"canceled_at,omitempty"`
	CancelReason string `json:"cancel_reason,omitempty"`
	// Usage is what the task's attempts used, summed over all its
	// attempts, retries and restarts (absent when none reported usage);
	// priced when any priced attempt's cost is in it.
	Usage *amount.Usage `json:"usage,omitempty"`
	// Steps is how many steps the task's agents recorded (absent: none;
	// Store.Steps reads them).
	Steps int `json:"steps,omitempty"`
	// Resumes is how many times the task's runs suspended (absent:
	// never), Wait its current or last wait (Wait.JSON, with "timed_out"
	// once a run resumed from it) and Signals how many signals were sent
	// to it (Store.Signals reads them).
	Resumes int             `json:"resumes,omitempty"`
	Wait    json.RawMessage `json:"wait,omitempty"`
	Signals int             `json:"signals,omitempty"`
	// Parent is, for a child task, the task that spawned it; Root the
	// first task of its tree.
	Parent string `json:"parent,omitempty"`
	Root   string `json:"root,omitempty"`
	// Children are the IDs of the children of the task's last children
	// wait, in spawn order (Get reads them; absent: none).
	Children []string `json:"children,omitempty"`
	History  []Event  `json:"history"`
	// nextAttemptMS is the record's FieldNextAttemptAt (Unix ms; a
	// retry's due time, stale once the retry started).
	nextAttemptMS int64
}

// Get returns task id's record and history.
func (s *Store) Get(ctx context.Context, id string) (*View, error) {
	var h *redis.MapStringStringCmd
	var l, kids *redis.StringSliceCmd
	_, err := s.rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		h = pipe.HGetAll(ctx, rkeys.Task(id))
		l = pipe.LRange(ctx, rkeys.TaskHistory(id), 0, -1)
		kids = pipe.LRange(ctx, rkeys.TaskChildren(id), 0, -1)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("record: get %s: %w", id, err)
	}
	m := h.Val()
	if len(m) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	v := viewOf(id, m)
	v.History = withFirst(m[FieldFirstEvent], l.Val())
	v.Children = kids.Val()
	held, err := s.readHolds(ctx, v)
	if err != nil {
		return nil, err
	}
	v.explain(held)
	return v, nil
}

// Views reads the records of tasks ids (without their histories) in one
// round trip: nil for a task with no record. Listings use it: a history
// can be long, and a page of tasks does not show it.
func (s *Store) Views(ctx context.Context, ids []string) ([]*View, error) {
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGetAll(ctx, rkeys.Task(id))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("record: views: %w", err)
	}
	out := make([]*View, len(ids))
	for i, c := range cmds {
		if m := c.Val(); len(m) > 0 {
			out[i] = viewOf(ids[i], m)
		}
	}
	return out, nil
}

// viewOf builds task id's View (without history) from its record hash m.
func viewOf(id string, m map[string]string) *View {
	v := &View{
		ID: cmp.Or(m[FieldID], id), Agent: m[FieldAgent], Action: m[FieldAction], State: State(m[FieldState]),
		ErrorClass: m[FieldErrorClass], ClassifiedBy: m[FieldClassifiedBy], Error: m[FieldError], Queue: m[FieldQueue],
		CorrelationID: m[FieldCorrelationID], EnqueuedAt: m[FieldEnqueuedAt], UpdatedAt: m[FieldUpdatedAt],
		CanceledAt: m[FieldCanceledAt], CancelReason: m[FieldCancelReason],
		Reason: m[FieldReason], Deadline: m[FieldDeadline], Seq: ParseSeq(m[FieldSeq]),
		Tenant: m[FieldTenant], Priority: cmp.Or(m[FieldPriority], PriorityNormal),
		Parent: m[FieldParent], Root: m[FieldRoot],
	}
	v.Attempts, _ = strconv.Atoi(m[FieldAttempts])
	v.Restarts, _ = strconv.Atoi(m[FieldRestarts])
	v.Run, _ = strconv.Atoi(m[FieldRun])
	v.nextAttemptMS, _ = strconv.ParseInt(m[FieldNextAttemptAt], 10, 64)
	if r := m[FieldResult]; r != "" && json.Valid([]byte(r)) {
		v.Result = json.RawMessage(r)
	}
	if n := m[FieldNotify]; n != "" {
		v.Notify = strings.Split(n, ",")
	}
	v.Usage = ParseUsageSum(m[FieldUsage])
	v.Steps, _ = strconv.Atoi(m[FieldSteps])
	v.Resumes, _ = strconv.Atoi(m[FieldResumes])
	v.Signals, _ = strconv.Atoi(m[FieldSignals])
	v.Wait = WaitView(m[FieldWait], m[FieldWaitOutcome])
	if v.ID == "" {
		v.ID = id
	}
	return v
}

// History returns task id's events, oldest first.
func (s *Store) History(ctx context.Context, id string) ([]Event, error) {
	var first *redis.StringCmd
	var l *redis.StringSliceCmd
	_, err := s.rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		first = pipe.HGet(ctx, rkeys.Task(id), FieldFirstEvent)
		l = pipe.LRange(ctx, rkeys.TaskHistory(id), 0, -1)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("record: history of %s: %w", id, err)
	}
	return withFirst(first.Val(), l.Val()), nil
}

// States reads the states of tasks ids in one round trip: "" for a task
// with no record.
func (s *Store) States(ctx context.Context, ids []string) ([]State, error) {
	cmds := make([]*redis.StringCmd, len(ids))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGet(ctx, rkeys.Task(id), FieldState)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("record: states: %w", err)
	}
	out := make([]State, len(ids))
	for i, c := range cmds {
		out[i] = State(c.Val())
	}
	return out, nil
}

// WaitView is the wait w (a record's FieldWait) as a task's JSON shows
// it: with "timed_out" once outcome (FieldWaitOutcome) says how it ended;
// nil when there is no wait.
func WaitView(w, outcome string) json.RawMessage {
	if w == "" || !json.Valid([]byte(w)) {
		return nil
	}
	if outcome == "" {
		return json.RawMessage(w)
	}
	var m map[string]any
	if json.Unmarshal([]byte(w), &m) != nil {
		return json.RawMessage(w)
	}
	m["timed_out"] = outcome == WaitTimeout
	b, _ := json.Marshal(m)
	return b
}
