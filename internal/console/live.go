package console

import (
	"net/http"
	"strconv"

	"github.com/agentq/agentq/internal/api"
	"github.com/agentq/agentq/internal/httpx"
	"github.com/agentq/agentq/internal/notify"
)

// hub is the notifier of the live events: Options.Notifier, else the
// console's own, started on first use.
func (c *Console) hub() *notify.Hub { return c.Hubs.Hub() }

// Close stops the console's own notifier, when it made one.
func (c *Console) Close() { c.Hubs.Close() }

// taskEvents serves GET /ui/tasks/{id}/events: the task's events as
// Server-Sent Events, behind the console's login (the Task page's live
// list reads it), as the API's GET /api/v1/tasks/{id}/events does.
func (c *Console) taskEvents(rw http.ResponseWriter, r *http.Request, _ session) error {
	v := r.Header.Get("Last-Event-ID")
	if v == "" {
		v = r.URL.Query().Get("after")
	}
	var after int64
	if v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return httpError(http.StatusBadRequest, "Last-Event-ID (or after) must be a non-negative event number.")
		}
		after = n
	}
	if c.opts.Holds != nil {
		release, err := c.opts.Holds.Acquire(r)
		if err != nil {
			rw.Header().Set("Retry-After", strconv.FormatInt(httpx.RetryAfterSeconds(api.HoldRetryAfter), 10))
			return httpError(http.StatusServiceUnavailable, "%v.", err)
		}
		defer release()
	}
	id := r.PathValue("id")
	ctx, cancel := c.bounded(r, 1)
	ok, err := c.Tasks.Exists(ctx, id)
	cancel()
	if err != nil {
		return err
	}
	if !ok {
		return httpError(http.StatusNotFound, "No task %q (never enqueued, or its record expired).", id)
	}
	return api.ServeEvents(rw, r, c.hub(), id, after, 0, c.opts.Logger.Warn)
}
