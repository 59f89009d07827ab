// Package schedule fires the config's schedules (schedules.NAME): every
// worker process runs a Scheduler, and each tick of a schedule is enqueued
// exactly once however many run, because the tick's task ID is derived
// from the schedule's name and the tick's time (TickID) and the task
// record refuses a second enqueue of an ID (tasks.Result.Duplicate).
//
// Ticks (Spec): cron expressions of 5 fields or 6 (seconds first), the
// descriptors @yearly … @hourly, and "@every D", in the schedule's zone.
// Across daylight-saving changes a wall-clock time that does not exist is
// no tick and one that happens twice is a tick once (see Spec).
//
// Missed ticks: a Scheduler that starts fires at most one tick that passed
// while no worker ran, the latest, and only when Redis records an earlier
// fire of the schedule (a new schedule starts with its next tick); it
// never fires a backlog. A worker that falls behind (a stopped process, a
// suspended machine) likewise fires only the latest tick that passed.
//
// Overlap: with overlap "skip", a tick is not fired while the task of the
// schedule's last fired tick has not ended (its record is not in a
// terminal state); the skipped tick is recorded as last_skipped.
//
// State: one hash per schedule (rkeys.Schedule: last_fire, last_task,
// last_skipped), written after each fire and expiring when the schedule
// stops firing; Status reads it for `inspector schedules`, the HTTP API
// and the console.
package schedule
