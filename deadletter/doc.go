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
//
// An ID identifies one dead letter: putting the same task again replaces
// its body (and moves it between agent/class indexes) instead of adding a
// second entry. Writes compare the body they expect to find, so concurrent
// writers never leave an entry indexed under the wrong agent or class, and
// Requeue never deletes a newer dead letter of the same task that appeared
// while it was enqueueing.
//
// Listings are newest first. Filtering by agent and class together
// intersects the two indexes inside one script.
package deadletter
