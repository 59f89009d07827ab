package deadletter_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/deadletter"
)

// exampleStore returns a Store on an in-memory Redis holding three dead
// letters, and a function that stops it.
func exampleStore() (*deadletter.Store, func()) {
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	store := deadletter.NewStore(rdb)
	at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	for i, e := range []struct{ agent, class string }{{"llm", "quota_exhausted"}, {"llm", "context_length"}, {"tool", "logic_error"}} {
		if _, err := store.Put(context.Background(), &deadletter.Entry{
			ID: fmt.Sprintf("task-%d", i), Agent: e.agent, ErrorClass: e.class, Error: "failed",
			Reason: deadletter.ReasonNotRetryable, Attempts: 1, DeadLetteredAt: at.Add(time.Duration(i) * time.Minute),
		}); err != nil {
			panic(err)
		}
	}
	return store, func() { _ = rdb.Close(); mr.Close() }
}

func ExampleStore_CountBy() {
	store, stop := exampleStore()
	defer stop()
	byAgent, byClass, err := store.CountBy(context.Background())
	if err != nil {
		panic(err)
	}
	fmt.Println(byAgent)
	fmt.Println(byClass)
	// Output:
	// map[llm:2 tool:1]
	// map[context_length:1 logic_error:1 quota_exhausted:1]
}

func ExampleStore_Get() {
	store, stop := exampleStore()
	defer stop()
	ctx := context.Background()
	e, err := store.Get(ctx, "task-1")
	if err != nil {
		panic(err)
	}
	fmt.Println(e.ID, e.Agent, e.ErrorClass, e.Reason, e.DeadLetteredAt.Format(time.RFC3339))
	_, err = store.Get(ctx, "task-9")
	fmt.Println(errors.Is(err, deadletter.ErrNotFound))
	// Output:
	// task-1 llm context_length not_retryable 2025-03-01T12:01:00Z
	// true
}

func ExampleStore_Delete() {
	store, stop := exampleStore()
	defer stop()
	ctx := context.Background()
	n, err := store.Delete(ctx, "task-0", "task-9")
	if err != nil {
		panic(err)
	}
	left, _ := store.Count(ctx)
	fmt.Println("deleted", n, "left", left)

	ids, _ := store.IDs(ctx, deadletter.Filter{Agent: "llm"})
	fmt.Println(ids)
	// Output:
	// deleted 1 left 2
	// [task-1]
}
