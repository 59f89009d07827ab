package inspect

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/broker"
)

// ErrUnknownQueue is returned for a queue asynq has never seen (it is not
// in asynq:queues) that is not configured either.
var ErrUnknownQueue = errors.New("inspect: unknown queue")

// PauseResult says what a pause or resume did.
type PauseResult struct {
	Queue  string `json:"queue"`
	Paused bool   `json:"paused"`
	// Changed is false when the queue already was as asked (paused, or
	// not paused): the call did nothing.
	Changed bool `json:"changed"`
}

// checkQueue refuses a queue that is neither known to asynq nor in known
// (the configured queues).
func checkQueue(ctx context.Context, rdb redis.UniversalClient, queue string, known []string) error {
	if queue == "" {
		return fmt.Errorf("%w: the queue name is empty", ErrUnknownQueue)
	}
	for _, q := range known {
		if q == queue {
			return nil
		}
	}
	ok, err := rdb.SIsMember(ctx, broker.AllQueues, queue).Result()
	if err != nil {
		return fmt.Errorf("inspect: queue %s: %w", queue, err)
	}
	if !ok {
		return fmt.Errorf("%w: %q (asynq has never seen it and it is not configured)", ErrUnknownQueue, queue)
	}
	return nil
}

// PauseQueue pauses queue with asynq's own pause (broker.PausedKey,
// which asynq's dequeue honours): no worker starts a task of it until
// ResumeQueue; its tasks stay where they are (pending, scheduled,
// retrying), and scheduled tasks and retries still come due into its
// pending list. Tasks already running run on. Pausing a paused queue
// changes nothing. known are the configured queues (a queue with no task
// yet may be paused ahead).
func PauseQueue(ctx context.Context, rdb redis.UniversalClient, queue string, known []string) (PauseResult, error) {
	res := PauseResult{Queue: queue, Paused: true}
	if err := checkQueue(ctx, rdb, queue, known); err != nil {
		return res, err
	}
	// asynq's Inspector.PauseQueue is this SETNX (value: Unix seconds), but
	// answers an untyped error when the queue is already paused.
	ok, err := rdb.SetNX(ctx, broker.PausedKey(queue), rdbNow(ctx, rdb), 0).Result()
	if err != nil {
		return res, fmt.Errorf("inspect: pause %s: %w", queue, err)
	}
	res.Changed = ok
	return res, nil
}

// ResumeQueue undoes PauseQueue, and wakes the idle workers of queue for
// the tasks it held (an idle worker waits for a wake-up token, and the
// tokens of the tasks enqueued during the pause were spent). Resuming a
// queue that is not paused changes nothing.
func ResumeQueue(ctx context.Context, rdb redis.UniversalClient, queue string, known []string) (PauseResult, error) {
	res := PauseResult{Queue: queue}
	if err := checkQueue(ctx, rdb, queue, known); err != nil {
		return res, err
	}
	n, err := rdb.Del(ctx, broker.PausedKey(queue)).Result()
	if err != nil {
		return res, fmt.Errorf("inspect: resume %s: %w", queue, err)
	}
	res.Changed = n == 1
	pending, err := rdb.LLen(ctx, broker.PendingKey(queue)).Result()
	if err != nil {
		return res, fmt.Errorf("inspect: resume %s: %w", queue, err)
	}
	if err := broker.PushWake(ctx, rdb, queue, int(min(pending, broker.WakeCap))); err != nil {
		return res, fmt.Errorf("inspect: resume %s: waking its workers: %w", queue, err)
	}
	return res, nil
}

// rdbNow is Redis's clock in Unix seconds (the value asynq writes), or 0.
func rdbNow(ctx context.Context, rdb redis.UniversalClient) int64 {
	t, err := rdb.Time(ctx).Result()
	if err != nil {
		return 0
	}
	return t.Unix()
}
