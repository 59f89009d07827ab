// asynq.go is agentq's copy of the asynq v0.26 internals it depends on.
// It holds three things:
//
//   - The client's enqueue, so that agentq can enqueue many tasks in
//     pipelined round trips (asynq's client takes one round trip per
//     task): the key layout (asynq's internal/base), the two scripts its
//     client runs to enqueue a task (internal/rdb: enqueueCmd,
//     scheduleCmd; AsynqEnqueue, AsynqSchedule) and the protobuf encoding
//     of its TaskMessage (internal/proto; AsynqTask.Message).
//   - The five scripts an asynq server runs that AsynqClient intercepts
//     (asynq_server.go: dequeue, forward, retry, requeue, done), so that it
//     recognises them by their SHA-1 in the EVALSHA asynq sends.
//   - Their sources, verbatim, in lua/asynq/ (each the body of a function
//     asynq_NAME(KEYS, ARGV); asynqSource cuts it out), which the
//     scripts run in their place call or patch: done.lua and retry.lua
//     call asynq's done and retry, forward.lua and requeue.lua are asynq's
//     forward and requeue patched (TestForwardIsAsynqsPatched and
//     TestRequeueIsAsynqsPatched hold them to asynq's), and DoneLua gives
//     asynq's done to internal/record's apply_acked script, which writes a
//     success's record and acknowledges its delivery in one script (the
//     ack riding: worker/ack.go, record.Store.ApplyAcked).
//
// Its tests hold it to asynq.Client byte for byte, check that every script
// is still asynq's (TestScriptsAreAsynqs), and fail loudly when the asynq
// version in go.mod is not AsynqVersion: then everything here, and the
// scripts built from it, must be checked against the new asynq before
// AsynqVersion is changed.

package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/agentq/agentq/internal/redisx"
)

// AsynqVersion is the asynq release this package copies.
const AsynqVersion = "v0.26.0"

// AllQueues is asynq's set of queue names (base.AllQueues).
const AllQueues = "asynq:queues"

// TaskKey is asynq's hash of task id on queue (base.TaskKey).
func TaskKey(queue, id string) string { return "asynq:{" + queue + "}:t:" + id }

// TaskKeyPrefix is the prefix of asynq's task hashes of queue
// (base.TaskKeyPrefix).
func TaskKeyPrefix(queue string) string { return "asynq:{" + queue + "}:t:" }

// PendingKey is asynq's list of the pending task IDs of queue (base.PendingKey).
func PendingKey(queue string) string { return "asynq:{" + queue + "}:pending" }

// LeaseKey is asynq's sorted set of the leased (active) task IDs of queue,
// scored by lease expiry in Unix seconds (base.LeaseKey).
func LeaseKey(queue string) string { return "asynq:{" + queue + "}:lease" }

// ActiveKey is asynq's list of the active task IDs of queue (base.ActiveKey).
func ActiveKey(queue string) string { return "asynq:{" + queue + "}:active" }

// RetryKey is asynq's sorted set of the task IDs of queue waiting for a
// retry (base.RetryKey); agentq's deferred tasks wait there too.
func RetryKey(queue string) string { return "asynq:{" + queue + "}:retry" }

// PausedKey is asynq's marker of a paused queue (base.PausedKey): while it
// exists, asynq's dequeue takes nothing from the queue.
func PausedKey(queue string) string { return "asynq:{" + queue + "}:paused" }

// ScheduledKey is asynq's sorted set of the scheduled task IDs of queue
// (base.ScheduledKey).
func ScheduledKey(queue string) string { return "asynq:{" + queue + "}:scheduled" }

// DefaultTimeout is the timeout asynq's client gives a task enqueued with
// neither a timeout nor a deadline (asynq's defaultTimeout).
const DefaultTimeout = 30 * time.Minute

// AsynqTask is what asynq.Client encodes for a task enqueued with
// asynq.TaskID(ID), asynq.Queue(Queue), asynq.MaxRetry(MaxRetry) and
// asynq.Timeout(Timeout) (zero: DefaultTimeout, as asynq does), and no
// other option.
type AsynqTask struct {
	Type     string
	Payload  []byte
	ID       string
	Queue    string
	MaxRetry int
	Timeout  time.Duration
}

// Message is the protobuf encoding of t's asynq TaskMessage: type (field
// 1), payload (2), id (3), queue (4), retry (5, an int32), timeout (8, in
// whole seconds), in field order. The other fields are zero (deadline: none)
// and proto3 leaves them out, as it leaves out an empty string or payload
// and a zero number.
func (t AsynqTask) Message() []byte {
	timeout := t.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	b := make([]byte, 0, len(t.Type)+len(t.Payload)+len(t.ID)+len(t.Queue)+32)
	b = appendBytes(b, 1, []byte(t.Type))
	b = appendBytes(b, 2, t.Payload)
	b = appendBytes(b, 3, []byte(t.ID))
	b = appendBytes(b, 4, []byte(t.Queue))
	b = appendInt(b, 5, int64(int32(t.MaxRetry)))
	b = appendInt(b, 8, int64(timeout.Seconds()))
	return b
}

// appendBytes appends a length-delimited field (wire type 2), unless v is
// empty (proto3's default).
func appendBytes(b []byte, field uint64, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	b = appendVarint(b, field<<3|2)
	b = appendVarint(b, uint64(len(v)))
	return append(b, v...)
}

// appendInt appends an int32 or int64 field (wire type 0: a varint, ten
// bytes when negative), unless v is 0 (proto3's default).
func appendInt(b []byte, field uint64, v int64) []byte {
	if v == 0 {
		return b
	}
	return appendVarint(appendVarint(b, field<<3), uint64(v))
}

// appendVarint appends v as a protobuf varint.
func appendVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// MessageID is the task ID (field 3) of msg, an asynq TaskMessage as
// protobuf encodes it; ok is false when msg is not one or has no ID.
func MessageID(msg []byte) (id string, ok bool) {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return "", false
		}
		msg = msg[n:]
		if num == 3 && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(msg)
			return string(v), n >= 0 && len(v) > 0
		}
		n = protowire.ConsumeFieldValue(num, typ, msg)
		if n < 0 {
			return "", false
		}
		msg = msg[n:]
	}
	return "", false
}

// RegisterQueues adds queues to AllQueues, as asynq's client does before
// it first enqueues on a queue (an SADD: asynq's inspector and servers
// list queues from it). Its error is Redis's.
func RegisterQueues(ctx context.Context, rdb redis.Cmdable, queues ...string) error {
	if len(queues) == 0 {
		return nil
	}
	names := make([]any, len(queues))
	for i, q := range queues {
		names[i] = q
	}
	return rdb.SAdd(ctx, AllQueues, names...).Err()
}

// RegisterCommand is RegisterQueues's command, for a pipeline or a
// MULTI/EXEC that writes a run on one of queues (not empty): agentq's
// producers send it (or, for a generated ID, its enqueue script runs it)
// with every enqueue rather than once per process, as
// asynq's client does, so that a set lost under them (a FLUSHALL, a
// restart without persistence, a failover to a replica that missed the
// write) is back with the next enqueue. An SADD of a member the set holds
// is one hash lookup in a round trip the enqueue makes anyway: INFO
// commandstats on a loaded 2-core machine gave 4.6 µs per SADD against
// 93 µs for the enqueue's whole MULTI/EXEC (and 80–100 µs of Redis CPU
// for a task's enqueue, run and ack on a quiet one: BENCHMARKS.md).
func RegisterCommand(queues ...string) []any {
	cmd := make([]any, 0, 2+len(queues))
	cmd = append(cmd, "sadd", AllQueues)
	for _, q := range queues {
		cmd = append(cmd, q)
	}
	return cmd
}

// AsynqEnqueue is asynq's enqueue of t (rdb.Enqueue): t goes on its queue's
// pending list at now (its pending_since), unless a task with its ID
// exists on the queue.
func AsynqEnqueue(t AsynqTask, now time.Time) redisx.Call {
	return redisx.Call{Script: enqueueScript, Keys: []string{TaskKey(t.Queue, t.ID), PendingKey(t.Queue)},
		Args: []any{t.Message(), t.ID, now.UnixNano()}}
}

// AsynqSchedule is asynq's schedule of t (rdb.Schedule): t goes on its queue's
// scheduled set, due at processAt (whole seconds), unless a task with its
// ID exists on the queue.
func AsynqSchedule(t AsynqTask, processAt time.Time) redisx.Call {
	return redisx.Call{Script: scheduleScript, Keys: []string{TaskKey(t.Queue, t.ID), ScheduledKey(t.Queue)},
		Args: []any{t.Message(), processAt.Unix(), t.ID}}
}

// AsynqAdded reads the reply of an Enqueue or Schedule call: true when the task
// was written, false when a task with its ID exists (asynq's
// ErrTaskIDConflict); an error when the call failed.
func AsynqAdded(r redisx.Result) (bool, error) {
	if r.Err != nil {
		return false, r.Err
	}
	n, ok := r.Val.(int64)
	if !ok {
		return false, fmt.Errorf("asynq enqueue: unexpected reply %v", r.Val)
	}
	return n == 1, nil
}

// enqueueScript is asynq's enqueueCmd, verbatim.
//
// KEYS[1] task hash, KEYS[2] the queue's pending list
// ARGV[1] encoded TaskMessage, ARGV[2] task ID, ARGV[3] now (Unix ns)
// Returns 1 when enqueued, 0 when the task ID exists.
var enqueueScript = redis.NewScript(enqueueSource)

var enqueueSource = asynqSource("enqueue")

// scheduleScript is asynq's scheduleCmd, verbatim.
//
// KEYS[1] task hash, KEYS[2] the queue's scheduled set
// ARGV[1] encoded TaskMessage, ARGV[2] process-at (Unix s, the score),
// ARGV[3] task ID
// Returns 1 when scheduled, 0 when the task ID exists.
var scheduleScript = redis.NewScript(scheduleSource)

var scheduleSource = asynqSource("schedule")
