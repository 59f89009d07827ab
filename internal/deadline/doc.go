// Package deadline is the fleet's deadline sweep: a service that, every
// SweepInterval, by one worker of the fleet per tick (a fleet lease on
// rkeys.DeadlineSweepClaim), goes through the tasks of the deadline index
// (rkeys.Deadlines, written by the producers with each task that has a
// deadline) whose deadline has passed, and dead-letters the ones still
// waiting (pending, scheduled, retrying, deferred, restarting): their
// dead letter and record through the worker's DeadLetterer (the delivery's
// own dead-lettering), then their waiting run off its queue. A running
// task is left to the worker that runs it (its call stops at the
// deadline); an ended one's entry is dropped.
package deadline
