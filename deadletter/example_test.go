package deadletter_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/deadletter"
)

func Example() {
	// An in-memory Redis for the example; use a real one in production.
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	ctx := context.Background()
	store := deadletter.NewStore(rdb)

	at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	for i, class := range []string{"quota_exhausted", "context_length", "quota_exhausted"} {
		_, err := store.Put(ctx, &deadletter.Entry{
			ID:             fmt.Sprintf("task-%d", i),
			Agent:          "llm",
			Action:         "chat",
			Params:         json.RawMessage(`{"prompt":"hello"}`),
			ErrorClass:     class,
			Error:          "provider said no",
			Reason:         deadletter.ReasonNotRetryable,
			Attempts:       1,
			DeadLetteredAt: at.Add(time.Duration(i) * time.Minute),
		})
		if err != nil {
			panic(err)
		}
	}

	// Newest first, filtered by agent and class.
	list, total, err := store.List(ctx, deadletter.Filter{Agent: "llm", Class: "quota_exhausted"})
	if err != nil {
		panic(err)
	}
	fmt.Println("quota_exhausted:", total)
	for _, e := range list {
		fmt.Println(" ", e.ID, e.DeadLetteredAt.Format(time.Kitchen))
	}

	// Requeue: the caller enqueues (here: pretends to); the entry is then removed.
	e, err := store.Requeue(ctx, "task-2", func(ctx context.Context, e *deadletter.Entry) error {
		fmt.Println("enqueue", e.ID, "with a fresh budget")
		return nil
	})
	if err != nil {
		panic(err)
	}
	n, _ := store.Count(ctx)
	fmt.Println("requeued", e.ID, "- left:", n)

	// Export as JSON Lines.
	if _, err := store.Export(ctx, os.Stdout, deadletter.Filter{Class: "context_length"}); err != nil {
		panic(err)
	}
	// Output:
	// quota_exhausted: 2
	//   task-2 12:02PM
	//   task-0 12:00PM
	// enqueue task-2 with a fresh budget
	// requeued task-2 - left: 2
	// {"id":"task-1","agent":"llm","action":"chat","params":{"prompt":"hello"},"correlation_id":"","error_class":"context_length","error":"provider said no","reason":"not_retryable","attempts":1,"restarts":0,"dead_lettered_at":"2025-03-01T12:01:00Z","history":null,"queue":"","run":0,"enqueued_at":"0001-01-01T00:00:00Z","requeues":0}
}
