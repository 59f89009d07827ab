package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agentq/agentq/tasks"
)

// maxSignalForm bounds the body of the signal form: a signal's data (at
// most tasks.MaxSignalBytes) URL-encoded may take three times its size.
const maxSignalForm = 3*tasks.MaxSignalBytes + 16<<10

// waitView is a task's current or last wait (the task JSON's "wait": the
// record's wait with "timed_out" once a run resumed from it) as the Task
// page shows it.
type waitView struct {
	Kind    string `json:"kind"`
	Signal  string `json:"signal"`
	Sleep   string `json:"sleep"`
	Until   string `json:"until"`
	Due     string `json:"due"`
	Timeout any    `json:"timeout"` // a duration string, or seconds
	// TimedOut is nil while the wait has not ended.
	TimedOut *bool `json:"timed_out"`
}

// Ended reports whether a run resumed from the wait.
func (w *waitView) Ended() bool { return w.TimedOut != nil }

// Expired reports whether the wait ended by its timeout.
func (w *waitView) Expired() bool { return w.TimedOut != nil && *w.TimedOut }

// TimeoutText is the wait's timeout as the agent gave it ("" for none).
func (w *waitView) TimeoutText() string {
	switch v := w.Timeout.(type) {
	case string:
		return v
	case float64:
		return (time.Duration(v * float64(time.Second))).String()
	}
	return ""
}

// parseWait reads a task's wait (nil when it has none or it is not a
// wait object).
func parseWait(raw json.RawMessage) *waitView {
	if len(raw) == 0 {
		return nil
	}
	var w waitView
	if json.Unmarshal(raw, &w) != nil || w.Kind == "" {
		return nil
	}
	return &w
}

// resumed is how many times task v has resumed: the record's resumes
// count the suspends, the current wait's too.
func resumed(v *tasks.View) int {
	if v.State == tasks.StateWaiting {
		return max(v.Resumes-1, 0)
	}
	return v.Resumes
}

// waitingSignal is the signal a task in state st with wait raw waits for
// ("" for none).
func waitingSignal(st tasks.State, raw json.RawMessage) string {
	if st != tasks.StateWaiting {
		return ""
	}
	if w := parseWait(raw); w != nil && w.Kind == "signal" {
		return w.Signal
	}
	return ""
}

// signal serves POST /ui/tasks/{id}/signal: sends the signal the form
// names ("name") with its data ("data": JSON; blank: null) as
// tasks.Client.Signal does (POST /api/v1/tasks/{id}/signals/{name}), and
// returns to the task's page saying what it did: the task resumed, the
// signal is kept until the task waits for it, or one of that name had
// been sent already. Data that is not JSON sends nothing (400).
func (c *Console) signal(rw http.ResponseWriter, r *http.Request, s session) error {
	id := r.PathValue("id")
	name := strings.TrimSpace(r.PostForm.Get("name"))
	data := bytes.TrimSpace([]byte(r.PostForm.Get("data")))
	if len(data) > 0 && !json.Valid(data) {
		var v any
		err := json.Unmarshal(data, &v)
		return httpError(http.StatusBadRequest, "Signal %q not sent: its data is not JSON (%v). Write JSON, e.g. {\"approved\": true}, or leave it blank for null.", name, err)
	}
	ctx, cancel := c.bounded(r, 2)
	defer cancel()
	res, err := c.Client.Signal(ctx, id, name, data)
	if err != nil {
		return signalError(id, name, err)
	}
	kind := "signal-kept"
	switch {
	case res.Duplicate:
		kind = "signal-duplicate"
	case res.Resumed:
		kind = "signal-resumed"
	}
	c.redirect(rw, r, s, c.base+"tasks/"+url.PathEscape(id), flashMsg{Kind: kind, ID: id, Key: name, For: string(res.State), Resumed: res.Resumed})
	return nil
}

// signalError is the error page of a refused signal.
func signalError(id, name string, err error) error {
	var ended *tasks.EndedError
	var verr *tasks.ValidationError
	switch {
	case errors.Is(err, tasks.ErrNotFound):
		return httpError(http.StatusNotFound, "No task %q.", id)
	case errors.As(err, &ended):
		return httpError(http.StatusConflict, "Signal %q not sent: task %s has ended (%s).", name, id, ended.State)
	case errors.Is(err, tasks.ErrSignalInvalid), errors.As(err, &verr):
		return httpError(http.StatusBadRequest, "Signal %q not sent: %v", name, err)
	case errors.Is(err, tasks.ErrSignalTooLarge):
		return httpError(http.StatusRequestEntityTooLarge, "Signal %q not sent: %v", name, err)
	case errors.Is(err, tasks.ErrSignalCap):
		return httpError(http.StatusConflict, "Signal %q not sent: %v", name, err)
	}
	return fmt.Errorf("console: signal %q to task %s (sending it again is safe): %w", name, id, err)
}

// signalText is the flash of a signal sent (kinds signal-*).
func (f flashMsg) signalText() string {
	switch f.Kind {
	case "signal-resumed":
		return fmt.Sprintf("Sent signal %s to task %s: it waited for it and resumes now.", f.Key, f.ID)
	case "signal-duplicate":
		s := fmt.Sprintf("Signal %s had been sent to task %s already: the first one is kept, nothing was written.", f.Key, f.ID)
		if f.Resumed {
			s += " The task waits for it: it resumes now."
		}
		return s
	case "signal-kept":
		return fmt.Sprintf("Sent signal %s to task %s: it is kept until the task waits for it (the task is %s now).", f.Key, f.ID, f.For)
	}
	return ""
}
