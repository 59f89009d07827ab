// Package deadletter is agentq's dead-letter store: tasks that will not be
// run again on their own, kept in Redis with everything needed to
// understand and replay them (envelope, error class, last error, reason,
// every attempt's history, timestamps).
//
// Unlike asynq's archive, which silently drops tasks past 10,000 entries or
// 90 days, the store never trims: an entry leaves only through Delete,
// Purge or a successful Requeue.
//
// # Layout in Redis
//
// Every key shares the {dlq} hash tag (see internal/rkeys), so one Lua
// script updates an entry and all its indexes atomically, also on Redis
// Cluster:
//
//	agentq:{dlq}:entries        hash   id -> entry JSON
//	agentq:{dlq}:index          zset   id scored by dead_lettered_at (ms)
//	agentq:{dlq}:agent:<agent>  zset   ids of one agent, same scores
//	agentq:{dlq}:class:<class>  zset   ids of one error class, same scores
//	agentq:{dlq}:indexes        set    the agent/class index keys in use
//	agentq:{dlq}:refs           hash   id -> the agent and class it is indexed under
//	agentq:{dlq}:requeue-claim:<id>  string  the token of the one requeue under way (TTL 1 min)
//
// An ID identifies one dead letter: putting the same task again replaces
// its body (and moves it between agent/class indexes) instead of adding a
// second entry. A script only touches keys it is given, so writers pass the
// agent and class they expect the stored entry to have; the script checks
// them against the refs hash and, when they differ, writes nothing and
// reports the actual ones for a retry. Concurrent writers thus never leave
// an entry indexed under the wrong agent or class. A requeue first claims
// the entry (its body unchanged since it was read, no other claim), so that
// of concurrent requeues exactly one enqueues the task; the others write
// nothing (ErrConflict, or ErrNotFound once it is gone). It deletes only if
// the stored body is still the one it enqueued, so a newer dead letter of
// the same task that appeared meanwhile is kept.
//
// Agent and class names are stored as JSON stores them (invalid UTF-8
// replaced by U+FFFD); Filter applies the same coercion.
//
// Listings are newest first. Filtering by agent and class together
// intersects the two indexes inside one script.
package deadletter
