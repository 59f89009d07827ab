package tasks_test

import (
	"context"
	"fmt"
	"time"

	"github.com/agentq/agentq/tasks"
)

// ExampleClient_Wait waits for a task to end. Here a cancel ends it; a
// worker's success or dead letter ends it the same way, and ctx bounds the
// wait.
func ExampleClient_Wait() {
	rdb, stop := exampleRedis()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := tasks.NewClient(rdb)
	if _, err := client.Enqueue(ctx, tasks.Task{ID: "report-1", Agent: "llm"}, tasks.ProcessIn(time.Hour)); err != nil {
		panic(err)
	}

	ended := make(chan *tasks.View, 1)
	go func() {
		v, err := client.Wait(ctx, "report-1")
		if err != nil {
			panic(err)
		}
		ended <- v
	}()
	if _, err := client.Cancel(ctx, "report-1", "user left"); err != nil {
		panic(err)
	}
	v := <-ended
	fmt.Println(v.ID, v.State, v.State.Terminal())
	// Output:
	// report-1 canceled true
}

// ExampleStore_History reads a task's events, oldest first: what the
// inspector's `task` command, the HTTP API's events and the webhooks show.
func ExampleStore_History() {
	rdb, stop := exampleRedis()
	defer stop()
	ctx := context.Background()
	client := tasks.NewClient(rdb)
	if _, err := client.Enqueue(ctx, tasks.Task{ID: "t-1", Agent: "llm"}, tasks.ProcessIn(time.Hour)); err != nil {
		panic(err)
	}
	if _, err := client.Cancel(ctx, "t-1", "not needed"); err != nil {
		panic(err)
	}

	events, err := client.Store().History(ctx, "t-1")
	if err != nil {
		panic(err)
	}
	for _, ev := range events {
		fmt.Printf("%d %s %q\n", ev.Seq, ev.Event, ev.Reason)
	}
	// Output:
	// 1 scheduled ""
	// 2 task_canceled "not needed"
}
