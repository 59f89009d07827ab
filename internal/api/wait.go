package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentq/agentq/internal/notify"
	"github.com/agentq/agentq/tasks"
)

// MaxWait is the longest GET /api/v1/tasks/{id}?wait= may wait.
const MaxWait = 60 * time.Second

// parseWait reads ?wait=: a Go duration ("30s", "1m") or a number of
// seconds ("30", "2.5"), from 0 to MaxWait.
func parseWait(s string) (time.Duration, error) {
	var d time.Duration
	if f, err := strconv.ParseFloat(s, 64); err == nil && !strings.ContainsAny(s, "eEnN") {
		d = time.Duration(f * float64(time.Second))
		if f > MaxWait.Seconds() {
			d = MaxWait + 1
		}
	} else if d, err = time.ParseDuration(s); err != nil {
		return 0, invalid("query parameter %q must be a duration (30s) or a number of seconds, at most %s (got %q)", "wait", MaxWait, s)
	}
	if d < 0 || d > MaxWait {
		return 0, invalid("query parameter %q must be from 0 to %s (got %q)", "wait", MaxWait, s)
	}
	return d, nil
}

// hub is the notifier the waits and event streams share: Options.Notifier,
// else the server's own, started on first use.
func (s *Server) hub() *notify.Hub { return s.Hubs.Hub() }

// Close stops the server's own notifier (when it made one: no
// Options.Notifier); Serve calls it as it returns.
func (s *Server) Close() { s.Hubs.Close() }

// HoldRetryAfter is the Retry-After of a wait or stream refused by
// Options.Holds.
const HoldRetryAfter = time.Second

// hold takes a hold of Options.Holds for r (a wait or an event stream),
// or is the 503 over_capacity reply.
func (s *Server) hold(r *http.Request) (func(), error) {
	release, err := s.opts.Holds.Acquire(r)
	if err != nil {
		e := newErr(http.StatusServiceUnavailable, CodeOverCapacity, "%v", err)
		e.retryAfter = HoldRetryAfter
		return nil, e
	}
	return release, nil
}

// getTaskWait serves GET /api/v1/tasks/{id}?wait=D: the task's JSON as
// soon as it has ended, or when D has elapsed (its current state).
func (s *Server) getTaskWait(rw http.ResponseWriter, r *http.Request) error {
	d, err := parseWait(r.URL.Query().Get("wait"))
	if err != nil {
		return err
	}
	release, err := s.hold(r)
	if err != nil {
		return err
	}
	defer release()
	defer holdOpen(r, false)()
	id := r.PathValue("id")
	// The server's read and write timeouts would cut a long wait short.
	rc := http.NewResponseController(rw)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Now().Add(d + 2*s.opts.RedisTimeout + 10*time.Second))
	wctx, cancel := context.WithTimeout(r.Context(), d)
	_, err = s.hub().Wait(wctx, id)
	cancel()
	switch {
	case errors.Is(err, tasks.ErrNotFound):
		return taskNotFound(id)
	case r.Context().Err() != nil:
		return nil // the caller has gone
	case err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, notify.ErrStopped):
		return err
	}
	return s.writeTask(rw, r, id)
}
