package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/durx"
	"github.com/agentq/agentq/internal/notify"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/tasks"
)

// waitFor is `enqueuer --wait`: it waits for task id to end (at most
// --wait-timeout) and prints its result: exit 0 when it succeeded,
// ExitTaskFailed when it was dead-lettered or canceled, ExitWaitTimeout
// when the timeout came first.
func (o *enqueueOptions) waitFor(ctx context.Context, app *App, client *tasks.Client, id string) error {
	wctx := ctx
	if o.waitTimeout > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, o.waitTimeout)
		defer cancel()
	}
	v, err := client.Wait(wctx, id)
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return &ExitError{Code: ExitWaitTimeout, Err: fmt.Errorf("task %s has not ended within %s (it goes on; inspector task %s --follow)", id, o.waitTimeout, id)}
	}
	if err != nil {
		return runtimeErr(err)
	}
	if o.json {
		printJSON(app, v)
	} else if v.State == tasks.StateSucceeded {
		result := []byte("null")
		if len(v.Result) > 0 {
			result = v.Result
		}
		fmt.Fprintln(app.Out, string(safeJSON(result)))
	}
	if v.State == tasks.StateSucceeded {
		return nil
	}
	msg := fmt.Sprintf("task %s %s", v.ID, v.State)
	if v.ErrorClass != "" {
		msg += ": " + v.ErrorClass
	}
	if v.Error != "" {
		msg += ": " + v.Error
	}
	if v.Reason != "" {
		msg += " (reason " + v.Reason + ")"
	}
	if v.CancelReason != "" {
		msg += " (cancel reason: " + v.CancelReason + ")"
	}
	return &ExitError{Code: ExitTaskFailed, Err: errors.New(msg)}
}

// followTask is `inspector task ID --follow`: it prints task id's events
// as they are recorded, one line each (JSON Lines with asJSON), until the
// terminal one.
func followTask(ctx context.Context, app *App, rdb redis.UniversalClient, id string, asJSON bool) error {
	hub := notify.New(rdb, record.StoreOf(tasks.NewStore(rdb)), notify.Options{Shards: 1, Logger: slog.New(slog.DiscardHandler)})
	hub.Start(context.Background())
	defer hub.Stop()
	err := hub.Follow(ctx, id, 0, func(ev tasks.Event) error {
		if asJSON {
			printJSON(app, ev)
			return nil
		}
		printEventLine(app.Out, ev)
		return nil
	}, notify.FollowOptions{})
	if errors.Is(err, tasks.ErrNotFound) {
		return runtimeErr(fmt.Errorf("no task with ID %q (never enqueued, or its history has expired)", id))
	}
	if err != nil {
		return runtimeErr(err)
	}
	return nil
}

// printEventLine prints one event on one line: seq, time, name, then what
// it carries.
func printEventLine(w io.Writer, ev tasks.Event) {
	line := fmt.Sprintf("%d %s %s", ev.Seq, ev.At.UTC().Format("2006-01-02T15:04:05.000Z"), ev.Event)
	if ev.Attempt > 0 {
		line += fmt.Sprintf(" attempt=%d", ev.Attempt)
	}
	if ev.ErrorClass != "" {
		line += " class=" + ev.ErrorClass
	}
	if ev.DelayMS > 0 {
		line += " delay=" + durx.Millis(ev.DelayMS).String()
	}
	if ev.Reason != "" {
		line += " reason=" + ev.Reason
	}
	if ev.Error != "" {
		line += " error=" + short(ev.Error, 200)
	}
	if len(ev.Data) > 0 {
		line += " data=" + short(string(ev.Data), 200)
	}
	tprintf(w, "%s\n", line)
}
