package tasks

import "github.com/agentq/agentq/internal/record"

// State is a task's lifecycle state (stable names, docs/DESIGN.md §3).
type State = record.State

// Task states.
const (
	StatePending    = record.StatePending
	StateScheduled  = record.StateScheduled
	StateActive     = record.StateActive
	StateRetrying   = record.StateRetrying
	StateDeferred   = record.StateDeferred
	StateRestarting = record.StateRestarting
	// StateWaiting: the task's agent suspended its run (a sleep, a time, a
	// signal: agent.Suspend); its next run waits until the wait ends
	// (Client.Signal sends a signal).
	StateWaiting      = record.StateWaiting
	StateSucceeded    = record.StateSucceeded
	StateDeadLettered = record.StateDeadLettered
	// StateCanceled: the task was canceled (Client.Cancel, `inspector task
	// cancel`, POST /api/v1/tasks/{id}/cancel). It is final: no run of the
	// task runs, retries, restarts or is dead-lettered after it.
	StateCanceled = record.StateCanceled
)

// States lists every task state, in lifecycle order (stable names).
var States = record.States

// Event is one entry of a task's history (stable JSON). Seq numbers the
// events of a task, 1, 2, 3, …, and never changes once given.
type Event = record.Event

// Event kinds recorded in a task's history (stable names).
const (
	EventQueued       = record.EventQueued
	EventScheduled    = record.EventScheduled
	EventSucceeded    = record.EventSucceeded
	EventFailed       = record.EventFailed // one call failed; the attempt goes on with a fallback agent
	EventRetrying     = record.EventRetrying
	EventDeferred     = record.EventDeferred
	EventRestarting   = record.EventRestarting
	EventDeadLettered = record.EventDeadLettered
	EventRequeued     = record.EventRequeued
	// EventInterrupted: the worker's shutdown cut the attempt and put the
	// task back without using an attempt (it was named "canceled").
	EventInterrupted = record.EventInterrupted
	// EventTaskCanceled: the task was canceled on request (Client.Cancel):
	// state canceled, for good. Reason holds the caller's reason.
	EventTaskCanceled = record.EventTaskCanceled
	// EventStep: the task's agent recorded a step (its Name, Bytes and
	// Usage on the event; the task's steps are handed to its later
	// attempts).
	EventStep = record.EventStep
	// EventWaiting, EventResumed and EventSignal: a run suspended (Wait,
	// DelayMS), a run that waited started (Resume, By), a signal was sent
	// to the task (Name, Bytes).
	EventWaiting = record.EventWaiting
	EventResumed = record.EventResumed
	EventSignal  = record.EventSignal
	// EventElided stands, in a long history, for the events between the
	// first HistoryHead and the last HistoryTail.
	EventElided = record.EventElided
)

// A history keeps its first HistoryHead events and its last HistoryTail;
// the events between are replaced by one EventElided event.
const (
	HistoryHead = record.HistoryHead
	HistoryTail = record.HistoryTail
)

// View is a task as `inspector task` and the HTTP API show it (stable JSON).
type View = record.View

// What holds a waiting task: View.WaitingFor (stable names; Store.Get
// explains it, with WaitingDetail and NextAttemptAt).
const (
	WaitingBudget      = record.WaitingBudget      // deferred: a tenant's or agent's budget has no room
	WaitingBreaker     = record.WaitingBreaker     // deferred: its agent's breaker is open or half-open
	WaitingLimit       = record.WaitingLimit       // deferred: its agent's rate, token or concurrency limit
	WaitingTenantCap   = record.WaitingTenantCap   // pending: its tenant is at its cap of runs in flight
	WaitingQueuePaused = record.WaitingQueuePaused // its queue is paused
	WaitingSignal      = record.WaitingSignal      // suspended on a signal
	WaitingChildren    = record.WaitingChildren    // suspended on its children
	WaitingSleep       = record.WaitingSleep       // suspended on a sleep or a time
	WaitingRetry       = record.WaitingRetry       // retrying: the backoff after a failed attempt
	WaitingRestart     = record.WaitingRestart     // restarting: the delay before its next run
	WaitingSchedule    = record.WaitingSchedule    // scheduled: its first run is due later
)

// MaxStoredResult bounds the result data kept in a task record.
const MaxStoredResult = record.MaxStoredResult
