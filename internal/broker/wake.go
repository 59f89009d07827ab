package broker

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/rkeys"
)

// WakeCap is the most tokens a queue's wake list holds. Tokens pile up while
// every worker is busy (nobody waits); each one left when the fleet goes
// idle costs one idle worker one empty look at its queues, so WakeCap bounds
// that waste, and it is far above the number of idle workers a burst needs
// to wake at once (each woken worker keeps taking tasks while it has free
// slots).
const WakeCap = 256

// pushScript pushes wake-up tokens for tasks made pending by a write that
// could not carry them (lua/wake.lua).
var pushScript = scripts.Script("lib/wake.lua", "wake.lua")

// PushWake wakes up to n idle workers of queue: it pushes n tokens (within WakeCap)
// onto the queue's wake list.
func PushWake(ctx context.Context, rdb redis.Scripter, queue string, n int) error {
	if n <= 0 {
		return nil
	}
	return pushScript.Run(ctx, rdb, []string{rkeys.Wake(queue)}, n, WakeCap).Err()
}

// nudgeScript pushes a token when a queue has work but no token
// (lua/nudge.lua).
var nudgeScript = scripts.Script("nudge.lua")

// Nudge is the fleet's periodic look at queue (internal/wake's Checks, one
// worker per queue and worker.poll_interval): when the queue has work an
// idle worker could take but no wake token, it pushes one. So a lost token
// delays its task by at most the interval, while idle workers block on
// their wake lists for much longer than it. It reports whether it pushed.
func Nudge(ctx context.Context, rdb redis.Scripter, queue string) (bool, error) {
	ready, _, _ := LaneKeys(queue)
	n, err := nudgeScript.Run(ctx, rdb, []string{PendingKey(queue), PausedKey(queue), ready, rkeys.Wake(queue)}).Int()
	return n == 1, err
}

// DueMessage is the announcement, on rkeys.DueChannel, of a task of queue
// scheduled for at: "<Unix s> <queue>".
func DueMessage(queue string, at time.Time) string {
	return strconv.FormatInt(at.Unix(), 10) + " " + queue
}

// ParseDue reads a DueMessage; ok is false for anything else.
func ParseDue(msg string) (queue string, at int64, ok bool) {
	sec, q, found := strings.Cut(msg, " ")
	if !found || q == "" {
		return "", 0, false
	}
	at, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return "", 0, false
	}
	return q, at, true
}

// QueueOf is the queue of one of asynq's keys of a queue
// ("asynq:{queue}:active" → "queue"); "" when key is not one.
func QueueOf(key string) string { return queueOf(key) }

// queueOf is the queue of one of asynq's keys of a queue
// ("asynq:{queue}:pending" → "queue"); "" when key is not one.
func queueOf(key string) string {
	i := strings.IndexByte(key, '{')
	j := strings.LastIndex(key, "}:")
	if i < 0 || j <= i {
		return ""
	}
	return key[i+1 : j]
}
