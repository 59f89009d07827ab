// Package record is the one home of a task's record: the Redis hash that
// holds a task's state (state, run, attempts, last error, result, …) and
// its event log (the history, a Redis list of JSON events, one per
// transition, each with a sequence number that never changes). It owns the
// record's schema (the field names, the states, the event kinds: Go
// constants that the Lua scripts receive rendered, never typed twice) and
// every script that writes either key; nothing else in agentq writes them
// (TestOnlyRecordWritesTheRecord holds the module to that).
//
// # The checked write
//
// A worker changes a record only through Store.Apply (or ApplyAcked, the
// same write riding asynq's acknowledgement of the delivery): Apply(d, c)
// applies the Change c for the Delivery d only while d's run is the
// record's current run (or a newer one, which it moves the record to), the
// run has not ended and the task is not canceled. Its Outcome says which:
// Applied, Stale (a newer run owns the record), Ended (the run has already
// succeeded or been dead-lettered) or Canceled. Nothing is written unless it
// is Applied.
//
// # Idempotent writes
//
// Every Change carries a write ID, made when the Change is, that the record
// keeps (field write_id). A write sent again after its reply was lost (a
// network error, a Redis paused or restarted, go-redis retrying a command)
// finds its own ID there and is a no-op answering Applied: a transition is
// recorded once, and so is its event. A change that starts an attempt sets
// the attempt count from the delivery's attempt number (asynq's delivery
// count within the run, plus the attempts of earlier runs) rather than
// incrementing it, so a start written twice, or never written by a worker
// that died early, still counts each delivery once.
//
// # The event log
//
// Each transition appends exactly one event in the same script that changes
// the record, stamped with the record's next sequence number (field seq;
// the first event is 1). A long history keeps its first HistoryHead and last
// HistoryTail events and folds the ones between into one history_elided
// event, which keeps the sequence number of the first event it replaces;
// repeated deferrals merge into the last deferral, which then takes a new
// number. Numbers are never reused or changed, so a reader that has seen up
// to N resumes with the events numbered above N.
//
// # Return convention
//
// Every script returns an array whose first element is a Code (rendered
// into the scripts as R.applied, R.stale, …), then what the script says
// about the record; the checked write answers applied, its common answer,
// with the bare Code (a table reply costs Redis a microsecond).
package record
