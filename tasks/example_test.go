package tasks_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/tasks"
)

// exampleRedis starts an in-memory Redis for an example (use a real one in
// production) and returns a client on it and a function that stops both.
func exampleRedis() (redis.UniversalClient, func()) {
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	return rdb, func() { _ = rdb.Close(); mr.Close() }
}

func ExampleClient_Enqueue() {
	rdb, stop := exampleRedis()
	defer stop()
	ctx := context.Background()
	client := tasks.NewClient(rdb)

	res, err := client.Enqueue(ctx, tasks.Task{
		ID:     "summarize-42", // the idempotency key; zero: a random ID
		Agent:  "llm",
		Action: "summarize",
		Params: json.RawMessage(`{"doc":"https://example.com/42"}`),
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.ID, res.State, res.Duplicate)
	// Output:
	// summarize-42 pending false
}

func ExampleClient_Enqueue_duplicate() {
	rdb, stop := exampleRedis()
	defer stop()
	ctx := context.Background()
	client := tasks.NewClient(rdb)

	// A task ID given twice is enqueued once: the second call reports the
	// task that exists.
	for range 2 {
		res, err := client.Enqueue(ctx, tasks.Task{ID: "invoice-7", Agent: "mailer"})
		if err != nil {
			panic(err)
		}
		fmt.Println(res.ID, res.State, "duplicate:", res.Duplicate)
	}
	// Output:
	// invoice-7 pending duplicate: false
	// invoice-7 pending duplicate: true
}

func ExampleClient_Enqueue_delay() {
	rdb, stop := exampleRedis()
	defer stop()
	ctx := context.Background()
	client := tasks.NewClient(rdb)

	// ProcessIn (or ProcessAt) schedules the first run for later.
	res, err := client.Enqueue(ctx, tasks.Task{ID: "reminder", Agent: "mailer"}, tasks.ProcessIn(10*time.Minute))
	if err != nil {
		panic(err)
	}
	fmt.Println(res.ID, res.State)
	// Output:
	// reminder scheduled
}

func ExampleProcessAt() {
	rdb, stop := exampleRedis()
	defer stop()
	ctx := context.Background()
	client := tasks.NewClient(rdb)

	tomorrow := time.Now().Add(24 * time.Hour)
	res, err := client.Enqueue(ctx, tasks.Task{ID: "report", Agent: "reporter"}, tasks.ProcessAt(tomorrow))
	if err != nil {
		panic(err)
	}
	fmt.Println(res.ID, res.State)

	// A time already past runs the task now.
	res, err = client.Enqueue(ctx, tasks.Task{ID: "late", Agent: "reporter"}, tasks.ProcessAt(time.Now().Add(-time.Hour)))
	if err != nil {
		panic(err)
	}
	fmt.Println(res.ID, res.State)
	// Output:
	// report scheduled
	// late pending
}

func ExampleClient_EnqueueMany() {
	rdb, stop := exampleRedis()
	defer stop()
	ctx := context.Background()
	client := tasks.NewClient(rdb)
	if _, err := client.Enqueue(ctx, tasks.Task{ID: "b", Agent: "llm"}); err != nil {
		panic(err)
	}

	// One round trip per Redis node for the whole batch; the results are
	// in the order of the tasks, a duplicate reported as such.
	results, err := client.EnqueueMany(ctx, []tasks.Task{
		{ID: "a", Agent: "llm", Action: "chat"},
		{ID: "b", Agent: "llm", Action: "chat"},
		{ID: "c", Agent: "llm", Action: "chat"},
	})
	if err != nil {
		panic(err)
	}
	for _, r := range results {
		fmt.Println(r.ID, r.State, r.Duplicate)
	}
	// Output:
	// a pending false
	// b pending true
	// c pending false
}

func ExampleClient_EnqueueMany_invalid() {
	rdb, stop := exampleRedis()
	defer stop()
	ctx := context.Background()
	client := tasks.NewClient(rdb)

	// A batch with an invalid task is refused whole, naming it.
	_, err := client.EnqueueMany(ctx, []tasks.Task{
		{ID: "ok", Agent: "llm"},
		{ID: "bad#1", Agent: "llm"},
	})
	var te *tasks.TaskError
	fmt.Println(errors.As(err, &te), errors.Is(err, tasks.ErrInvalidEnvelope))
	n, _ := client.Store().Exists(ctx, "ok")
	fmt.Println("ok enqueued:", n)
	// Output:
	// true true
	// ok enqueued: false
}

func ExampleWithQueues() {
	rdb, stop := exampleRedis()
	defer stop()
	ctx := context.Background()
	// The queues the workers serve (the config's worker.queues): a task for
	// another queue would wait forever, so it is refused.
	client := tasks.NewClient(rdb, tasks.WithQueues("default", "bulk"))

	res, err := client.Enqueue(ctx, tasks.Task{Agent: "llm", Queue: "bulk"})
	fmt.Println(res.State, err)
	_, err = client.Enqueue(ctx, tasks.Task{Agent: "llm", Queue: "urgent"})
	var ve *tasks.ValidationError
	fmt.Println(errors.As(err, &ve), errors.Is(err, tasks.ErrInvalidEnvelope))
	// Output:
	// pending <nil>
	// true true
}

func ExampleStore_Get() {
	rdb, stop := exampleRedis()
	defer stop()
	ctx := context.Background()
	client := tasks.NewClient(rdb)
	if _, err := client.Enqueue(ctx, tasks.Task{ID: "t1", Agent: "llm", Action: "chat", CorrelationID: "req-9"}); err != nil {
		panic(err)
	}

	v, err := client.Store().Get(ctx, "t1")
	if err != nil {
		panic(err)
	}
	fmt.Println(v.ID, v.Agent, v.Action, v.Queue, v.CorrelationID, v.State, v.Attempts)
	for _, ev := range v.History {
		fmt.Println("event:", ev.Event)
	}

	_, err = client.Store().Get(ctx, "nope")
	fmt.Println(errors.Is(err, tasks.ErrNotFound))
	// Output:
	// t1 llm chat default req-9 pending 0
	// event: queued
	// true
}

func ExampleClient_Cancel() {
	rdb, stop := exampleRedis()
	defer stop()
	ctx := context.Background()
	client := tasks.NewClient(rdb)
	if _, err := client.Enqueue(ctx, tasks.Task{ID: "later", Agent: "llm"}, tasks.ProcessIn(time.Hour)); err != nil {
		panic(err)
	}

	// A waiting task is taken off its queue; a running one would be told
	// to stop. Either way its record is canceled first.
	res, err := client.Cancel(ctx, "later", "no longer needed")
	if err != nil {
		panic(err)
	}
	fmt.Println(res.State, "was", res.PreviousState, "removed:", res.Removed, "reason:", res.Reason)

	// A task that has ended cannot be canceled.
	_, err = client.Cancel(ctx, "later", "again")
	fmt.Println(errors.Is(err, tasks.ErrTaskEnded))
	_, err = client.Cancel(ctx, "unknown", "")
	fmt.Println(errors.Is(err, tasks.ErrNotFound))
	// Output:
	// canceled was scheduled removed: true reason: no longer needed
	// true
	// true
}

func ExampleClient_Enqueue_deadLetter() {
	rdb, stop := exampleRedis()
	defer stop()
	ctx := context.Background()
	client := tasks.NewClient(rdb)
	dlq := deadletter.NewStore(rdb)

	// A task that ended in the dead-letter queue (here: put there directly).
	if _, err := dlq.Put(ctx, &deadletter.Entry{
		ID: "job-1", Agent: "llm", Action: "chat", ErrorClass: "context_length",
		Error: "prompt too long", Reason: deadletter.ReasonNotRetryable, Attempts: 1,
		DeadLetteredAt: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC),
	}); err != nil {
		panic(err)
	}

	// Its ID is not enqueued again: the dead letter is the task.
	res, err := client.Enqueue(ctx, tasks.Task{ID: "job-1", Agent: "llm"})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.ID, res.State, "duplicate:", res.Duplicate)

	// Requeueing it runs it again with a fresh budget of attempts.
	e, err := dlq.RequeueTask(ctx, client, "job-1")
	if err != nil {
		panic(err)
	}
	v, err := client.Store().Get(ctx, e.ID)
	if err != nil {
		panic(err)
	}
	n, _ := dlq.Count(ctx)
	fmt.Println(v.ID, v.State, "dead letters left:", n)
	// Output:
	// job-1 dead_lettered duplicate: true
	// job-1 pending dead letters left: 0
}

func ExampleValidateID() {
	for _, id := range []string{"order-17", "order-17#2", ".."} {
		fmt.Println(id, tasks.ValidateID(id) == nil)
	}
	// Output:
	// order-17 true
	// order-17#2 false
	// .. false
}

func ExampleParseAsynqID() {
	// Run N of task X has the asynq task ID "X#N" (a restart is a new run).
	for _, id := range []string{"order-17", "order-17#2"} {
		task, run, ok := tasks.ParseAsynqID(id)
		fmt.Println(task, run, ok)
	}
	// Output:
	// order-17 0 false
	// order-17 2 true
}

func ExampleRequest_Task() {
	// A producer's request, as the HTTP API and `enqueuer --file` read it.
	var r tasks.Request
	if err := json.Unmarshal([]byte(`{"agent":"llm","action":"chat","in":"90s","queue":"default"}`), &r); err != nil {
		panic(err)
	}
	t, delay, err := r.Task([]string{"default"})
	fmt.Println(t.Agent, t.Action, t.Queue, delay, err)

	r.In = "soon"
	_, _, err = r.Task(nil)
	var ve *tasks.ValidationError
	fmt.Println(errors.As(err, &ve))
	// Output:
	// llm chat default 1m30s <nil>
	// true
}
