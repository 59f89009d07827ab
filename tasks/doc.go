// Package tasks is the producer side of agentq: the envelope that travels
// through the queue, the Client other Go services import to enqueue and
// cancel work, and read-only views of a task and its history.
//
// # Enqueueing
//
//	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
//	c := tasks.NewClient(rdb)
//	res, err := c.Enqueue(ctx, tasks.Task{
//		ID:     "order-42-summary", // optional idempotency key
//		Agent:  "summarize",
//		Action: "short",
//		Params: json.RawMessage(`{"text":"…"}`),
//	}, tasks.ProcessIn(30*time.Second))
//
// A task given an ID that was already enqueued (and whose record is still
// retained) is not enqueued again: Enqueue returns a Result with Duplicate
// set and the existing task's State. Without an ID a random one is
// generated. Every agentq task is an ordinary asynq task of type TypeName
// on its queue (DefaultQueue unless Task.Queue names another), so asynq's
// own tools still see the queues.
//
// # Envelope and runs
//
// The asynq payload is an Envelope (JSON; Encode, Decode). Besides what the
// producer supplied it carries Restarts, the restarts the current budget
// has used, and Run, which numbers the runs of a task: 0 for the first, +1
// for every restart or requeue. Each run has its own asynq task ID
// (Envelope.AsynqID: "ID" then "ID#1", "ID#2", …), so scheduling a run twice
// is a harmless conflict (ErrDuplicate from EnqueueRun), and a delivery of
// an older run than the task record's is stale: the worker's checked write
// refuses it and the delivery is dropped.
//
// # Records and history
//
// Each task has a record (a Redis hash: state, attempts, restarts, last
// error class and error, result) and a history of Event values (queued,
// retrying, deferred, restarting, succeeded, dead_lettered, requeued,
// interrupted, task_canceled, …), each with a sequence number (Event.Seq)
// that never changes. Only agentq's internal record package writes them,
// one event per transition in one atomic step. Client.Cancel ends a task
// in state canceled for good. Both keys expire after the retention period
// (7 days by default, config history.retention) counted from the task's
// last event; dead letters keep their own copy of the history and never
// expire. Store.Get returns the View that `inspector task --json` prints (a
// stable JSON shape).
package tasks
