package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

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

// ErrStale is returned by Begin when a delivery belongs to a run that has
// already been superseded (by a restart or a requeue): it must be dropped.
var ErrStale = errors.New("stale delivery of a superseded run")

// ErrEnded is returned by Begin when the delivery's run has already ended
// (succeeded or dead-lettered): a redelivery after the outcome was
// recorded but before asynq's ack. It must be acked without running.
var ErrEnded = errors.New("delivery of a run that has already ended")

// ErrCanceled is returned, writing nothing, by the worker's writes to a
// task record (Begin, BeginTransition, Transition, TransitionIfRun and
// the Apply* helpers) when the task has been canceled (state canceled,
// see Client.Cancel): the delivery must stop, its outcome is not
// recorded, and it is acked (never retried, restarted or dead-lettered).
var ErrCanceled = errors.New("task has been canceled")

// Store keeps each task's record (a Redis hash) and its lifecycle history (a
// Redis list of JSON events). Both keys share a hash tag, expire after the
// retention period counted from the last event, and are written in one
// round trip per transition.
type Store struct {
	rdb       redis.UniversalClient
	retention time.Duration
	now       func() time.Time
	runner    ScriptRunner // WithScriptRunner's, or redisx.Direct
	direct    bool         // runner is the default redisx.Direct
}

// ScriptRunner runs a Redis script and returns its reply, like
// (*redis.Script).Run. A worker passes one that group-commits concurrent
// calls into shared pipelines (see WithScriptRunner).
type ScriptRunner = redisx.Runner

// WithScriptRunner sends the per-attempt writes (Begin, Transition) through
// r, e.g. a group-committing batcher shared by many goroutines. Each call
// still returns only once its write is applied; nil keeps one round trip per
// call.
func WithScriptRunner(r ScriptRunner) StoreOption {
	return func(s *Store) { s.runner, s.direct = r, false }
}

// eval runs script through the store's runner.
func (s *Store) eval(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	res, err := s.runner.Run(ctx, script, keys, args...)
	cmd.SetVal(res)
	cmd.SetErr(err)
	return cmd
}

// StoreOption configures a Store.
type StoreOption func(*Store)

// WithRetention sets how long records live after their last event; zero
// keeps DefaultRetention.
func WithRetention(d time.Duration) StoreOption {
	return func(s *Store) {
		if d > 0 {
			s.retention = d
		}
	}
}

// WithClock sets the clock used to stamp events (tests).
func WithClock(now func() time.Time) StoreOption { return func(s *Store) { s.now = now } }

// NewStore returns a Store on rdb.
func NewStore(rdb redis.UniversalClient, opts ...StoreOption) *Store {
	s := &Store{rdb: rdb, retention: DefaultRetention, now: time.Now}
	for _, o := range opts {
		o(s)
	}
	if s.runner == nil {
		s.runner, s.direct = redisx.Direct(rdb), true
	}
	return s
}

// Now is the store's clock.
func (s *Store) Now() time.Time { return s.now() }

// createScript records a newly enqueued task.
//
// KEYS[1] task record, KEYS[2] history
// ARGV[1] id, ARGV[2] agent, ARGV[3] action, ARGV[4] queue, ARGV[5] enqueued_at (RFC3339Nano),
// ARGV[6] state, ARGV[7] event JSON, ARGV[8] lifetime in seconds (createTTL), ARGV[9] correlation id
// Returns 1 when the record was created, 0 when it existed (the event is then
// put at the head of the history: a worker got there first).
var createScript = redis.NewScript(createLua + `
return agentq_create(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9])
`)

// createLua defines agentq_create(rec, hist, id, agent, action, queue,
// enqueued_at, state, event, ttl, correlation_id), the body of createScript
// that enqueueTaskScript shares: one HSET for a new record, field by field
// (HSETNX) under what a worker already wrote.
const createLua = `
local function agentq_create(rec, hist, id, agent, action, queue, enq, state, ev, ttl, corr)
  local existed = redis.call("EXISTS", rec)
  if existed == 0 then
    redis.call("HSET", rec, "id", id, "agent", agent, "action", action, "queue", queue,
      "enqueued_at", enq, "correlation_id", corr, "state", state, "run", "0")
    redis.call("RPUSH", hist, ev)
  else
    redis.call("HSETNX", rec, "id", id)
    redis.call("HSETNX", rec, "agent", agent)
    redis.call("HSETNX", rec, "action", action)
    redis.call("HSETNX", rec, "queue", queue)
    redis.call("HSETNX", rec, "enqueued_at", enq)
    redis.call("HSETNX", rec, "correlation_id", corr)
    redis.call("HSETNX", rec, "state", state)
    redis.call("HSETNX", rec, "run", "0")
    redis.call("LPUSH", hist, ev)
  end
  redis.call("EXPIRE", rec, ttl)
  redis.call("EXPIRE", hist, ttl)
  return 1 - existed
end
`

// createTTL is the lifetime in seconds Create gives a record whose first
// event is ev: the retention plus the delay to the first run, rounded up.
func (s *Store) createTTL(ev Event) int64 {
	return durx.CeilSeconds(s.lifetime(ev))
}

// lifetime is how long a record whose last event is ev lives: the
// retention plus the event's delay (a scheduled first run, a retry, a
// deferral or a restart due later), saturated (durx.Add) so that a delay
// near the largest duration never wraps to a negative lifetime (which
// Redis would take as "delete now").
func (s *Store) lifetime(ev Event) time.Duration {
	return durx.Add(s.retention, durx.Millis(ev.DelayMS))
}

// Exists reports whether task id has a record.
func (s *Store) Exists(ctx context.Context, id string) (bool, error) {
	n, err := s.rdb.Exists(ctx, rkeys.Task(id)).Result()
	return n == 1, err
}

// Create writes the record of a newly enqueued task and its first event.
// The record and history live for the retention counted from when the
// first run is due: ev.DelayMS (the delay of a scheduled task) plus the
// retention, so that a task scheduled further out than the retention still
// has its record when it runs.
func (s *Store) Create(ctx context.Context, env *Envelope, state State, ev Event) (bool, error) {
	ev.At = s.stamp(ev.At)
	b := ev.marshal()
	n, err := s.eval(ctx, createScript, []string{rkeys.Task(env.ID), rkeys.TaskHistory(env.ID)},
		env.ID, env.Agent, env.Action, env.Queue, env.EnqueuedAt.UTC().Format(time.RFC3339Nano),
		string(state), string(b), s.createTTL(ev), env.CorrelationID).Int()
	if err != nil {
		return false, fmt.Errorf("tasks: create record of %s: %w", env.ID, err)
	}
	return n == 1, nil
}

// beginScript marks the start of an attempt, fencing stale deliveries, and
// optionally records a transition in the same step (BeginTransition: an
// attempt that ran before its start was recorded).
//
// KEYS[1] task record, KEYS[2] history
// ARGV[1] run of the delivery, ARGV[2] lifetime in seconds (the retention,
// plus the event's delay), ARGV[3] the run's restart number (kept even when
// the restart's own transition was never recorded), ARGV[4] event JSON (""
// for none), ARGV[5] the least remaining lifetime in seconds that needs no
// refresh (see refreshSlack), ARGV[6] "1" to clear the record's error
// (error_class and error, set to "" when either is set), ARGV[7] number n
// of seed pairs, ARGV[8..7+2n] field/value pairs seeded when the record is
// missing or lacks its "run" field, i.e. was not written by Create (id,
// agent, …), ARGV[8+2n..] the field/value pairs to set (at least "state").
// Returns the task's total attempt count after the increment, or, writing
// nothing, -1 when the record's run is newer than the delivery's (stale:
// drop it), -2 when the delivery's run has already ended (succeeded or
// dead_lettered: ack it), -3 when the record needs seeding but n is 0
// (the caller sends the call again with the seed pairs) and -4 when the
// task has been canceled (any run: ack it, ErrCanceled).
//
// The happy path (a record Create wrote moments ago) is one HMGET, one
// HSET, one TTL and one RPUSH: the seed pairs are not even sent (begin
// sends them only after a -3), the attempt count is read with run and
// state and written back in the HSET, run and restarts are written only
// when the run changes (they go together), the error fields only when
// there is an error to clear, and the two keys' lifetimes are
// left alone while the record's is within refreshSlack of ARGV[2] (every
// script that sets the record's lifetime sets the history's to at least
// as much, so the history's is too; a history this call creates gets it).
var beginScript = redis.NewScript(historyLua + beginLua + `
return agentq_begin(KEYS[1], KEYS[2], 0)
`)

// beginLua defines agentq_begin(rec, hist, o), beginScript's body on the
// record rec and history hist with its ARGV from ARGV[o+1] on
// (ackBeginScript runs it too, after asynq's three done arguments).
const beginLua = `
local function agentq_begin(rec, hist, o)
  local cur = redis.call("HMGET", rec, "run", "state", "attempts", "error_class", "error")
  if cur[2] == "canceled" then return -4 end
  local run = tonumber(cur[1] or "-1")
  local d = tonumber(ARGV[o + 1])
  if run > d then return -1 end
  if run == d and (cur[2] == "succeeded" or cur[2] == "dead_lettered") then return -2 end
  local last = o + 7 + 2 * tonumber(ARGV[o + 7])
  if not cur[1] then
    if last == o + 7 then return -3 end
    for i = o + 8, last, 2 do redis.call("HSETNX", rec, ARGV[i], ARGV[i+1]) end
  end
  local n = (tonumber(cur[3]) or 0) + 1
  if run == d then
    redis.call("HSET", rec, "attempts", n, unpack(ARGV, last + 1))
  else
    redis.call("HSET", rec, "run", ARGV[o + 1], "restarts", ARGV[o + 3], "attempts", n, unpack(ARGV, last + 1))
  end
  if ARGV[o + 6] == "1" and ((cur[4] or "") ~= "" or (cur[5] or "") ~= "") then
    redis.call("HSET", rec, "error_class", "", "error", "")
  end
  local fresh = redis.call("TTL", rec) >= tonumber(ARGV[o + 5])
  if not fresh then redis.call("EXPIRE", rec, ARGV[o + 2]) end
  local len = 0
  if ARGV[o + 4] ~= "" then len = hist_append(hist, ARGV[o + 4], "0") end
  if not fresh or len == 1 then redis.call("EXPIRE", hist, ARGV[o + 2]) end
  return n
end
`

// refreshSlack is how much of a record's lifetime may be missing before
// a Begin or BeginTransition refreshes it: 1% of the lifetime, at most a
// minute. A quick first delivery then finds the lifetime Create gave the
// record moments before still whole and spares Redis the two EXPIREs;
// its record lives at least 99% of the retention after its last event.
func refreshSlack(lifetime time.Duration) time.Duration {
	return min(lifetime/100, time.Minute)
}

// Begin records that an attempt of env's current run starts and returns the
// task's total number of attempts so far. It returns ErrStale when env's run
// has been superseded.
func (s *Store) Begin(ctx context.Context, env *Envelope) (int, error) {
	n, err := s.begin(ctx, env, beginWrite{lifetime: s.retention,
		fields: []any{"state", string(StateActive), "updated_at", s.now().UTC().Format(time.RFC3339Nano)}})
	if err != nil {
		return 0, fmt.Errorf("tasks: begin attempt of %s: %w", env.ID, err)
	}
	return n, nil
}

// BeginTransition records the start of an attempt of env's current run and
// its outcome (Begin followed by Transition) in one atomic step, for an
// attempt that ran before its start was recorded: the worker skips Begin
// for a first delivery whose agent answers quickly, saving a round trip.
// Fields p sets (Run, Restarts) override the delivery's. It returns the
// task's total number of attempts, or ErrStale, writing nothing, when env's
// run has been superseded. Like Transition, the record lives for the
// retention plus the event's delay.
func (s *Store) BeginTransition(ctx context.Context, env *Envelope, p Patch, ev Event) (int, error) {
	n, err := s.begin(ctx, env, s.beginTransition(p, ev))
	if err != nil {
		return 0, fmt.Errorf("tasks: record %s event of %s: %w", ev.Event, env.ID, err)
	}
	return n, nil
}

// beginWrite is what beginScript writes besides the start: the record
// fields to set, the error to clear, a history event ("" for none), and
// the keys' lifetime.
type beginWrite struct {
	fields   []any
	clear    bool
	event    string
	lifetime time.Duration
}

// beginTransition is the write of BeginTransition(p, ev): ev stamped, the
// keys living for the retention plus the event's delay, p's ClearError
// left to the script (which clears an error only where there is one).
func (s *Store) beginTransition(p Patch, ev Event) beginWrite {
	ev.At = s.stamp(ev.At)
	clear := p.ClearError && p.ErrorClass == ""
	if clear {
		p.ClearError = false
	}
	return beginWrite{fields: p.fields(ev.At), clear: clear, event: string(ev.marshal()),
		lifetime: s.lifetime(ev)}
}

// begin runs beginScript: env's start and w.
func (s *Store) begin(ctx context.Context, env *Envelope, w beginWrite) (int, error) {
	keys := []string{rkeys.Task(env.ID), rkeys.TaskHistory(env.ID)}
	return beginRun(env, w, func(args []any) (int, error) {
		return s.eval(ctx, beginScript, keys, args...).Int()
	})
}

// beginRun makes a call of agentq_begin (run, given its arguments) for
// env's start and w, and maps the reply (beginResult). The record's seed
// fields go only with a second call, when the first finds no record
// written by Create.
func beginRun(env *Envelope, w beginWrite, run func(args []any) (int, error)) (int, error) {
	n, err := run(beginArgs(env, w, false))
	if err == nil && n == -3 {
		n, err = run(beginArgs(env, w, true))
	}
	if err != nil {
		return 0, err
	}
	return beginResult(n)
}

// beginArgs are beginScript's ARGV: the seed pairs only when seed is set.
func beginArgs(env *Envelope, w beginWrite, seed bool) []any {
	secs := durx.CeilSeconds(w.lifetime)
	clear := "0"
	if w.clear {
		clear = "1"
	}
	head := []any{env.Run, secs, env.Restarts, w.event, secs - int64(refreshSlack(w.lifetime)/time.Second), clear}
	if !seed {
		args := make([]any, 0, len(head)+1+len(w.fields))
		return append(append(append(args, head...), 0), w.fields...)
	}
	pairs := []any{"id", env.ID, "agent", env.Agent, "action", env.Action, "queue", env.Queue,
		"correlation_id", env.CorrelationID, "enqueued_at", env.EnqueuedAt.UTC().Format(time.RFC3339Nano)}
	args := make([]any, 0, len(head)+1+len(pairs)+len(w.fields))
	return append(append(append(append(args, head...), len(pairs)/2), pairs...), w.fields...)
}

// beginResult maps beginScript's reply to the attempt count or its error.
func beginResult(n int) (int, error) {
	switch n {
	case -1:
		return 0, ErrStale
	case -2:
		return 0, ErrEnded
	case -3:
		return 0, errors.New("begin script asked for seeding twice")
	case -4:
		return 0, ErrCanceled
	}
	return n, nil
}

// Patch is the part of a task record a transition changes. Zero fields are
// left as they are, except State which is always written.
type Patch struct {
	State      State
	Run        *int
	Restarts   *int
	ErrorClass string
	Error      string
	ClearError bool
	// NextAttemptAt, when set, is when the next attempt is due (a retry):
	// asynq schedules in whole seconds, so the worker that picks the retry
	// up early waits for the rest (see Store.NextAttemptAt).
	NextAttemptAt time.Time
	// Result is the agent's result data (a success); kept when it is at most
	// MaxStoredResult bytes, otherwise replaced by a note saying so.
	Result json.RawMessage
}

// MaxStoredResult bounds the result data kept in a task record.
const MaxStoredResult = 64 << 10

// transitionScript records a lifecycle event and the new state.
//
// KEYS[1] task record, KEYS[2] history
// ARGV[1] TTL seconds, ARGV[2] event JSON, ARGV[3] "1" to merge the event
// into a deferral it repeats (see historyLua), ARGV[4..] field/value pairs.
// Returns 1, or 0 writing nothing when the task has been canceled
// (ErrCanceled).
var transitionScript = redis.NewScript(historyLua + `
if redis.call("HGET", KEYS[1], "state") == "canceled" then return 0 end
redis.call("HSET", KEYS[1], unpack(ARGV, 4))
hist_append(KEYS[2], ARGV[2], ARGV[3])
redis.call("EXPIRE", KEYS[1], ARGV[1])
redis.call("EXPIRE", KEYS[2], ARGV[1])
return 1
`)

// Transition records a lifecycle event and the new state in one atomic step
// (one script, shared with concurrent calls' scripts when the store has a
// WithScriptRunner runner). A deferral that follows a deferral is merged
// into it (Event.Count), and a long history is elided in its middle (see
// HistoryHead). The record lives for the retention after the event, plus
// the event's delay when it has one (a retry, deferral or restart due
// later), so that it outlives the wait. A canceled task's record is final:
// Transition then writes nothing and returns ErrCanceled.
func (s *Store) Transition(ctx context.Context, id string, p Patch, ev Event) error {
	ev.At = s.stamp(ev.At)
	b := ev.marshal()
	merge := "0"
	if ev.Event == EventDeferred {
		merge = "1"
	}
	args := append([]any{durx.CeilSeconds(s.lifetime(ev)), string(b), merge}, p.fields(ev.At)...)
	n, err := s.eval(ctx, transitionScript, []string{rkeys.Task(id), rkeys.TaskHistory(id)}, args...).Int()
	if err != nil {
		return fmt.Errorf("tasks: record %s event of %s: %w", ev.Event, id, err)
	}
	if n == 0 {
		return fmt.Errorf("tasks: record %s event of %s: %w", ev.Event, id, ErrCanceled)
	}
	return nil
}

// fields are the record fields a transition to p writes at time at.
func (p Patch) fields(at time.Time) []any {
	fields := []any{"state", string(p.State), "updated_at", at.UTC().Format(time.RFC3339Nano)}
	if p.Run != nil {
		fields = append(fields, "run", *p.Run)
	}
	if p.Restarts != nil {
		fields = append(fields, "restarts", *p.Restarts)
	}
	if len(p.Result) > 0 {
		res := p.Result
		if len(res) > MaxStoredResult {
			res, _ = json.Marshal(map[string]any{"truncated": true, "bytes": len(p.Result)})
		}
		fields = append(fields, "result", string(res))
	}
	if !p.NextAttemptAt.IsZero() {
		fields = append(fields, "next_attempt_at", p.NextAttemptAt.UnixMilli())
	}
	if p.ErrorClass != "" || p.ClearError {
		fields = append(fields, "error_class", p.ErrorClass, "error", p.Error)
	}
	return fields
}

// transitionIfRunScript is Transition fenced by the record's run.
//
// KEYS[1] task record, KEYS[2] history
// ARGV[1] the run the record must be at, ARGV[2] retention seconds,
// ARGV[3] event JSON, ARGV[4..] field/value pairs.
// Returns 1 when applied, 0 when the record is at another run (or absent),
// -1 when the task has been canceled (ErrCanceled); nothing is written
// unless it returns 1.
var transitionIfRunScript = redis.NewScript(historyLua + `
local st = redis.call("HMGET", KEYS[1], "run", "state")
if st[2] == "canceled" then return -1 end
local cur = st[1]
if cur ~= ARGV[1] then return 0 end
redis.call("HSET", KEYS[1], unpack(ARGV, 4))
hist_append(KEYS[2], ARGV[3], "0")
redis.call("EXPIRE", KEYS[1], ARGV[2])
redis.call("EXPIRE", KEYS[2], ARGV[2])
return 1
`)

// TransitionIfRun is Transition applied only while the record is still at
// run; it reports whether it was applied. It completes a transition a dead
// worker left unrecorded without overwriting a newer run's state. A
// canceled task's record is final: ErrCanceled.
func (s *Store) TransitionIfRun(ctx context.Context, id string, run int, p Patch, ev Event) (bool, error) {
	ev.At = s.stamp(ev.At)
	b := ev.marshal()
	args := append([]any{strconv.Itoa(run), int64(s.retention / time.Second), string(b)}, p.fields(ev.At)...)
	n, err := s.eval(ctx, transitionIfRunScript, []string{rkeys.Task(id), rkeys.TaskHistory(id)}, args...).Int()
	if err != nil {
		return false, fmt.Errorf("tasks: record %s event of %s: %w", ev.Event, id, err)
	}
	if n == -1 {
		return false, fmt.Errorf("tasks: record %s event of %s: %w", ev.Event, id, ErrCanceled)
	}
	return n == 1, nil
}

func (s *Store) stamp(at time.Time) time.Time {
	if at.IsZero() {
		return s.now().UTC()
	}
	return at.UTC()
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
	v, err := s.rdb.HMGet(ctx, rkeys.Task(id), "state", "run", "next_attempt_at").Result()
	if err != nil {
		return RunState{}, fmt.Errorf("tasks: state of %s: %w", id, err)
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
	ID            string `json:"id"`
	Agent         string `json:"agent"`
	Action        string `json:"action"`
	State         State  `json:"state"`
	Attempts      int    `json:"attempts"`
	Restarts      int    `json:"restarts"`
	ErrorClass    string `json:"error_class"`
	Error         string `json:"error"`
	Queue         string `json:"queue,omitempty"`
	CorrelationID string `json:"correlation_id,omitempty"`
	Run           int    `json:"run"`
	EnqueuedAt    string `json:"enqueued_at,omitempty"`
	UpdatedAt     string `json:"updated_at,omitempty"`
	// Result is the agent's result data once the task succeeded.
	Result json.RawMessage `json:"result,omitempty"`
	// CanceledAt and CancelReason are set once the task is canceled
	// (state canceled; see Client.Cancel).
	CanceledAt   string  `json:"canceled_at,omitempty"`
	CancelReason string  `json:"cancel_reason,omitempty"`
	History      []Event `json:"history"`
}

// Get returns task id's record and history.
func (s *Store) Get(ctx context.Context, id string) (*View, error) {
	var h *redis.MapStringStringCmd
	var l *redis.StringSliceCmd
	_, err := s.rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		h = pipe.HGetAll(ctx, rkeys.Task(id))
		l = pipe.LRange(ctx, rkeys.TaskHistory(id), 0, -1)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("tasks: get %s: %w", id, err)
	}
	m := h.Val()
	if len(m) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	v := &View{
		ID: m["id"], Agent: m["agent"], Action: m["action"], State: State(m["state"]),
		ErrorClass: m["error_class"], Error: m["error"], Queue: m["queue"],
		CorrelationID: m["correlation_id"], EnqueuedAt: m["enqueued_at"], UpdatedAt: m["updated_at"],
		CanceledAt: m["canceled_at"], CancelReason: m["cancel_reason"], History: []Event{},
	}
	v.Attempts, _ = strconv.Atoi(m["attempts"])
	v.Restarts, _ = strconv.Atoi(m["restarts"])
	v.Run, _ = strconv.Atoi(m["run"])
	if r := m["result"]; r != "" && json.Valid([]byte(r)) {
		v.Result = json.RawMessage(r)
	}
	if v.ID == "" {
		v.ID = id
	}
	for _, raw := range l.Val() {
		var ev Event
		if json.Unmarshal([]byte(raw), &ev) == nil {
			v.History = append(v.History, ev)
		}
	}
	return v, nil
}

// History returns task id's events, oldest first.
func (s *Store) History(ctx context.Context, id string) ([]Event, error) {
	raw, err := s.rdb.LRange(ctx, rkeys.TaskHistory(id), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("tasks: history of %s: %w", id, err)
	}
	out := make([]Event, 0, len(raw))
	for _, r := range raw {
		var ev Event
		if json.Unmarshal([]byte(r), &ev) == nil {
			out = append(out, ev)
		}
	}
	return out, nil
}

// requeueScript records that a dead letter was put back on its queue as
// run ARGV[1], after that run was enqueued, rebuilding the record from the
// dead letter when it has expired.
//
// KEYS[1] task record, KEYS[2] history
// ARGV[1] the new run, ARGV[2] retention seconds, ARGV[3] "requeued" event
// JSON, ARGV[4] updated_at, ARGV[5] number n of seed pairs,
// ARGV[6..5+2n] field/value pairs seeded when the record is missing,
// ARGV[6+2n..] history events (JSON) restored when the history is missing.
// Returns 1 when the record now shows the run as pending, 2 when the run
// had begun already (only the event is added), 0 when the record is at a
// later run or canceled (nothing written).
var requeueScript = redis.NewScript(historyLua + `
if redis.call("HGET", KEYS[1], "state") == "canceled" then return 0 end
local cur = redis.call("HGET", KEYS[1], "run")
local run = tonumber(ARGV[1])
if cur and tonumber(cur) > run then return 0 end
if cur and tonumber(cur) == run then
  hist_append(KEYS[2], ARGV[3], "0")
  redis.call("EXPIRE", KEYS[2], ARGV[2])
  return 2
end
local last = 5 + 2 * tonumber(ARGV[5])
for i = 6, last, 2 do redis.call("HSETNX", KEYS[1], ARGV[i], ARGV[i+1]) end
if redis.call("EXISTS", KEYS[2]) == 0 then
  for i = last + 1, #ARGV do hist_append(KEYS[2], ARGV[i], "0") end
end
redis.call("HSET", KEYS[1], "state", "pending", "run", ARGV[1], "restarts", 0,
  "error_class", "", "error", "", "updated_at", ARGV[4])
redis.call("HDEL", KEYS[1], "next_attempt_at")
hist_append(KEYS[2], ARGV[3], "0")
redis.call("EXPIRE", KEYS[1], ARGV[2])
redis.call("EXPIRE", KEYS[2], ARGV[2])
return 1
`)

// Requeued records that env's run (a requeue of a dead letter, already
// enqueued) waits on its queue: state pending, a fresh restart budget, the
// error cleared, and the "requeued" event ev. When the record has expired
// it is rebuilt from env and the dead letter's history hist. A record at a
// later run is left alone; one whose run has already begun only gains ev.
func (s *Store) Requeued(ctx context.Context, env *Envelope, hist []Event, ev Event) error {
	ev.At = s.stamp(ev.At)
	b := ev.marshal()
	seed := []any{"id", env.ID, "agent", env.Agent, "action", env.Action, "queue", env.Queue,
		"correlation_id", env.CorrelationID, "enqueued_at", env.EnqueuedAt.UTC().Format(time.RFC3339Nano), "attempts", 0}
	args := make([]any, 0, 5+len(seed)+len(hist))
	args = append(args, env.Run, int64(s.retention/time.Second), string(b), ev.At.Format(time.RFC3339Nano), len(seed)/2)
	args = append(args, seed...)
	for _, h := range hist {
		hb := h.marshal()
		args = append(args, string(hb))
	}
	if err := s.eval(ctx, requeueScript, []string{rkeys.Task(env.ID), rkeys.TaskHistory(env.ID)}, args...).Err(); err != nil {
		return fmt.Errorf("tasks: record requeue of %s: %w", env.ID, err)
	}
	return nil
}
