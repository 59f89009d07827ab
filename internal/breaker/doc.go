// Package breaker is the Redis-shared circuit breaker of every agent key,
// the agent health derived from it, and the health probes' shared state.
// Whether a failure counts against a breaker is resilience.Policy's call;
// this package only counts what it is told (Record's Outcome).
//
// See DESIGN.md §2.
//
// One breaker per key lives in Redis as a hash (rkeys.Breaker) plus a sorted
// set of half-open trial leases (rkeys.BreakerTrials, same hash tag). Every
// admission and every transition is one Lua script over those two keys, so all
// workers of all processes see and change the same state atomically, and no
// lock is held while the agent runs: Allow returns, the caller runs the agent,
// then Record reports the outcome.
//
// Time: every elapsed-time decision (cooldown, trial lease expiry) uses the
// Redis server's TIME, read inside the script, so the clocks of the worker
// machines do not matter. Tests may inject a Clock; its value is then passed
// to the scripts instead (ARGV), which makes the state machine deterministic.
//
// Generations fence stale results: every transition bumps the generation, an
// Admission carries the generation it was given under, and a Record whose
// generation is no longer current (or whose trial lease is gone) changes no
// state. Such a Record still counts the outcome in the plain statistics
// (failure_count/success_count and last_failure_at/last_success_at): the
// backend did answer, and those counters describe the backend, not the state
// machine.
//
// Modes (Config.Mode): in rate mode (the default) a CLOSED breaker
// opens when, over the sliding Window of the fleet's counted calls,
// failures/total ≥ FailureRate with total ≥ MinCalls and failures from at
// least MinFailingTasks distinct tasks (Record's ForTask); the window is a
// ring of 10 bucket counters (rkeys.BreakerWindow) and the failing tasks a
// bounded sorted set (rkeys.BreakerFailing), same hash tag, expiring 2
// windows after the last counted call. In consecutive mode it opens after
// FailureThreshold consecutive counted failures.
//
// Persistence: the breaker hash and its trials carry no TTL and nothing but
// Reset, Trip and the state machine writes them; New writes
// nothing, so a new worker never resets shared state. The happy path of a
// CLOSED breaker is read-only in Allow and free in Record (successes are
// batched and flushed by Start's loop) — in rate mode while the process
// knows the window holds no failure (a counted failure announces kind
// "hot"; successes are then written at once, for a window).
//
// Half-open episodes: OPEN becomes HALF_OPEN lazily, inside Allow, once the
// server time reaches open_until; that starts an episode (generation+1) in
// which at most HalfOpenMaxCalls trials are admitted, cluster-wide. A trial
// success closes the breaker, a trial failure reopens it for twice the
// last cooldown, capped at MaxCooldown (closing resets it to Cooldown). A trial that ends without a verdict — its lease expired (the
// worker died) or it was released with OutcomeIgnore (the call was canceled)
// — ends the episode too: a new episode starts (generation+1, every lease
// dropped) with a fresh set of trial slots. So "admissions per generation ≤
// HalfOpenMaxCalls" holds strictly, and a killed worker wedges the breaker for
// at most TrialLease. With HalfOpenMaxCalls > 1 the other trials of an ended
// episode become stale: their results are counted but decide nothing.
package breaker
