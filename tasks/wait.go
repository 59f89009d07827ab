package tasks

import (
	"context"
	"log/slog"

	"github.com/agentq/agentq/internal/notify"
)

// Wait waits for task id to end (succeeded, dead_lettered or canceled)
// and returns its View (result, error class, error, a dead letter's
// reason), or ctx's error when ctx ends first; an unknown task is
// ErrNotFound. It subscribes to the task's channel, marks the task
// watched and then reads its state, so that the end is never missed; it
// also re-reads the state every second in case an announcement is lost.
// Each call holds one Redis pub/sub connection while it waits: a process
// that waits for many tasks at once should share one notifier (the HTTP
// API's GET /api/v1/tasks/{id}?wait= does).
func (c *Client) Wait(ctx context.Context, id string) (*View, error) {
	h := notify.New(c.store.rdb, c.store.rec, notify.Options{Shards: 1, Logger: slog.New(slog.DiscardHandler)})
	h.Start(context.Background())
	defer h.Stop()
	if _, err := h.Wait(ctx, id); err != nil {
		return nil, err
	}
	return c.store.Get(ctx, id)
}
