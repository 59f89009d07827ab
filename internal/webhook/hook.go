package webhook

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/agentq/agentq/internal/record"
)

// Hook is one configured webhook, resolved (config.Config.Webhook).
type Hook struct {
	Name string
	// URL is where deliveries are POSTed. It is never logged whole
	// (redact.URL).
	URL string
	// Key is the HMAC key, decoded from the whsec_ secret (ParseSecret).
	Key []byte
	// Events are the webhook event names it is told of (Events' names).
	Events []string
	// Timeout bounds one delivery attempt.
	Timeout time.Duration
	// MaxAge is how long a delivery is retried before it is given up.
	MaxAge time.Duration
	// Concurrency is the most deliveries to it a worker makes at once (of
	// the worker's pool, Options.Concurrency: at most half of it). Zero:
	// DefaultHookConcurrency.
	Concurrency int
}

// Event names of webhooks, as the config names them, and the history
// events they stand for: canceled is the task_canceled event.
var Events = map[string]string{
	"succeeded":     record.EventSucceeded,
	"dead_lettered": record.EventDeadLettered,
	"canceled":      record.EventTaskCanceled,
	"retrying":      record.EventRetrying,
	"restarting":    record.EventRestarting,
	"deferred":      record.EventDeferred,
	"requeued":      record.EventRequeued,
	"interrupted":   record.EventInterrupted,
	"failed":        record.EventFailed,
	"waiting":       record.EventWaiting,
	"resumed":       record.EventResumed,
	"signal":        record.EventSignal,
}

// DefaultEvents are a webhook's events when the config names none: the
// three that end a task.
var DefaultEvents = []string{"succeeded", "dead_lettered", "canceled"}

// EventNames lists the webhook event names, sorted.
func EventNames() []string {
	out := make([]string, 0, len(Events))
	for n := range Events {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// nameOf is the webhook event name of the history event ev ("" when no
// webhook may be told of it).
func nameOf(ev string) string {
	if ev == record.EventTaskCanceled {
		return "canceled"
	}
	if _, ok := Events[ev]; ok {
		return ev
	}
	return ""
}

// wants reports whether h is told of the history event ev.
func (h Hook) wants(ev string) bool {
	n := nameOf(ev)
	return n != "" && slices.Contains(h.Events, n)
}

// Type is the "type" of the body of a delivery of the history event ev:
// "task." and its webhook event name (task.succeeded, task.canceled, …).
func Type(ev string) string {
	if n := nameOf(ev); n != "" {
		return "task." + n
	}
	return fmt.Sprintf("task.%s", ev)
}
