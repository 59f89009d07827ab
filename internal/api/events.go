package api

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/agentq/agentq/internal/notify"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/tasks"
)

// DefaultKeepAlive is how often an idle event stream gets a comment.
const DefaultKeepAlive = 15 * time.Second

// streamWriteTimeout bounds each write of an event stream: a client that
// stops reading is dropped.
const streamWriteTimeout = 30 * time.Second

// resumeAfter is the sequence number an event stream resumes after: the
// Last-Event-ID header, else ?after=, else 0.
func resumeAfter(r *http.Request) (int64, error) {
	name, v := "Last-Event-ID", r.Header.Get("Last-Event-ID")
	if v == "" {
		name, v = "after", r.URL.Query().Get("after")
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, invalid("%s must be a non-negative event sequence number (got %q)", name, v)
	}
	return n, nil
}

// taskEvents serves GET /api/v1/tasks/{id}/events: the task's events as
// Server-Sent Events (id: its seq, event: its name, data: its JSON) as
// they are recorded, after Last-Event-ID (or ?after=), ending after the
// terminal event; a comment every KeepAlive while idle.
func (s *Server) taskEvents(rw http.ResponseWriter, r *http.Request) error {
	after, err := resumeAfter(r)
	if err != nil {
		return err
	}
	release, err := s.hold(r)
	if err != nil {
		return err
	}
	defer release()
	id := r.PathValue("id")
	// Read in the notifier's shared pipelines: a burst of streams queues
	// in the process, not on the Redis pool (a longer bound than one
	// call's before the 503).
	ctx, cancel := s.bounded(r, 3)
	ok, err := s.hub().Exists(ctx, id)
	cancel()
	if err != nil {
		return err
	}
	if !ok {
		return taskNotFound(id)
	}
	return ServeEvents(rw, r, s.hub(), id, after, s.opts.KeepAlive, s.opts.Logger.Warn)
}

// ServeEvents streams task id's events after after on rw as Server-Sent
// Events until the terminal one (the API's and the console's streams);
// keepAlive 0 is DefaultKeepAlive. Errors after the stream has begun end
// it (logged with warn, unless the client went away).
func ServeEvents(rw http.ResponseWriter, r *http.Request, hub *notify.Hub, id string, after int64, keepAlive time.Duration, warn func(string, ...any)) error {
	if keepAlive <= 0 {
		keepAlive = DefaultKeepAlive
	}
	defer holdOpen(r, true)()
	rc := http.NewResponseController(rw)
	_ = rc.SetReadDeadline(time.Time{})
	h := rw.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	rw.WriteHeader(http.StatusOK)
	write := func(format string, args ...any) error {
		_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		if _, err := fmt.Fprintf(rw, format, args...); err != nil {
			return err
		}
		return rc.Flush()
	}
	if r.Method == http.MethodHead {
		return nil
	}
	if err := write(": events of task %s after %d\n\n", strconv.Quote(id), after); err != nil {
		return nil
	}
	err := hub.Follow(r.Context(), id, after, func(ev record.Event) error {
		return write("id: %d\nevent: %s\ndata: %s\n\n", ev.Seq, ev.Event, ev.Marshal())
	}, notify.FollowOptions{KeepAlive: keepAlive, Idle: func() error { return write(": keep-alive\n\n") }})
	if err != nil && r.Context().Err() == nil && !errors.Is(err, notify.ErrStopped) && !errors.Is(err, tasks.ErrNotFound) {
		warn("event stream ended early", "task", id, "err", err)
	}
	return nil
}
