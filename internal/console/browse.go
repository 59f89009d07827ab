package console

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/agentq/agentq/internal/inspect"
)

// taskList serves GET /ui/tasks: ?id= opens a task; ?q= (the search box)
// opens the task with that ID, else lists the tasks with that correlation
// ID; otherwise a page of the tasks the filters select (queue, state,
// agent, tenant, correlation_id, cursor), as GET /api/v1/tasks.
func (c *Console) taskList(rw http.ResponseWriter, r *http.Request, s session) error {
	q := r.URL.Query()
	if id := strings.TrimSpace(q.Get("id")); id != "" {
		http.Redirect(rw, r, c.base+"tasks/"+url.PathEscape(id), http.StatusSeeOther)
		return nil
	}
	ctx, cancel := c.bounded(r, 2)
	defer cancel()
	if term := strings.TrimSpace(q.Get("q")); term != "" {
		ok, err := c.Tasks.Exists(ctx, term)
		if err != nil {
			return err
		}
		if !ok {
			_, derr := c.DeadLetters.Get(ctx, term)
			ok = derr == nil
		}
		if ok {
			http.Redirect(rw, r, c.base+"tasks/"+url.PathEscape(term), http.StatusSeeOther)
		} else {
			http.Redirect(rw, r, c.base+"tasks?correlation_id="+url.QueryEscape(term), http.StatusSeeOther)
		}
		return nil
	}
	f := inspect.TaskFilter{Queue: q.Get("queue"), States: inspect.ParseStates(q.Get("state")), Agent: q.Get("agent"),
		Tenant: q.Get("tenant"), CorrelationID: q.Get("correlation_id"), Limit: 100, Cursor: q.Get("cursor")}
	page, err := inspect.Tasks(ctx, c.Redis, f)
	if errors.Is(err, inspect.ErrBadFilter) || errors.Is(err, inspect.ErrBadCursor) {
		return httpError(http.StatusBadRequest, "%v", err)
	}
	if err != nil {
		return err
	}
	next := ""
	if page.NextCursor != "" {
		nq := url.Values{}
		for _, k := range []string{"queue", "state", "agent", "tenant", "correlation_id"} {
			if v := q.Get(k); v != "" {
				nq.Set(k, v)
			}
		}
		nq.Set("cursor", page.NextCursor)
		next = c.base + "tasks?" + nq.Encode()
	}
	var queue *inspect.QueueStats
	if f.Queue != "" {
		if qs, err := inspect.Queues(c.Redis); err == nil {
			for i := range qs {
				if qs[i].Queue == f.Queue {
					queue = &qs[i]
				}
			}
		}
	}
	c.render(rw, r, s, http.StatusOK, "tasks.html", "tasks", "Tasks", map[string]any{
		"Tasks": page.Tasks, "Next": next, "Filter": f, "State": q.Get("state"), "Queue": queue,
		"Paged": f.Cursor != "", "States": inspect.ListableStates,
		"OtherState": len(f.States) > 1, // e.g. "retrying,deferred", from the overview
	})
	return nil
}

// queuePause serves POST /ui/queues/{name}/pause.
func (c *Console) queuePause(rw http.ResponseWriter, r *http.Request, s session) error {
	return c.setPaused(rw, r, s, true)
}

// queueResume serves POST /ui/queues/{name}/resume.
func (c *Console) queueResume(rw http.ResponseWriter, r *http.Request, s session) error {
	return c.setPaused(rw, r, s, false)
}

func (c *Console) setPaused(rw http.ResponseWriter, r *http.Request, s session, pause bool) error {
	ctx, cancel := c.bounded(r, 3)
	defer cancel()
	name := r.PathValue("name")
	do, kind := inspect.ResumeQueue, "resumed"
	if pause {
		do, kind = inspect.PauseQueue, "paused"
	}
	if _, err := do(ctx, c.Redis, name, c.Config.ServedQueues()); err != nil {
		if errors.Is(err, inspect.ErrUnknownQueue) {
			return httpError(http.StatusNotFound, "No queue %q.", name)
		}
		return err
	}
	back := c.base
	if b := r.PostForm.Get("back"); strings.HasPrefix(b, c.base) && !strings.HasPrefix(b, "//") {
		back = b
	}
	c.redirect(rw, r, s, back, flashMsg{Kind: kind, Key: name})
	return nil
}
