// Fair dispatch is agentq's order of dispatch: the order in which the ready
// runs of a queue are handed to workers, across the tenants that have
// work, weighted round-robin, with a per-tenant cap on runs in flight and
// three priorities within a tenant.
//
// asynq stays the transport (leases, crash recovery, scheduling); only
// the order of what becomes ready is agentq's. Every key lives in the
// queue's hash tag, beside asynq's own ("asynq:{queue}:…"), so each step
// is one script on Redis Cluster too.
//
// Where a waiting run is:
//
//   - A run of the default tenant ("") at normal priority waits in asynq's
//     own pending list, exactly as without tenants: a queue whose producers
//     never name a tenant or a priority (and no default cap) pays for
//     fairness the ready set named in the dequeue's EXISTS, and
//     no more commands than asynq's dequeue.
//   - Every other run waits in its lane: a list per tenant and priority
//     (rkeys.FairLane), and its tenant is in the ready set
//     (rkeys.FairReady, scored by the tenant's pass) or, at its cap, in the
//     capped set (rkeys.FairCapped). asynq's task hash carries the lane
//     (fields aq_t and aq_p), so that a retry, a scheduled run and a
//     shutdown's put-back return to it.
//
// The dequeue (lua/dequeue.lua, run by AsynqClient in place of asynq's)
// serves the tenant with the lowest pass, its high lane first, then normal,
// then low, and advances its pass by 1/weight (stride scheduling: over any
// stretch where two tenants are backlogged, they are served in the ratio
// of their weights). A tenant that joins enters at pass 0, so it is served
// next: another tenant's backlog delays it by one dispatch, not by the
// backlog. The default tenant's runs in asynq's pending list take part
// with a pass kept in rkeys.FairState.
//
// A capped tenant's runs in asynq's active list are counted: the dequeue
// that hands one out marks the task hash (aq_c) and raises
// rkeys.FairInflight; asynq's done, retry and requeue of a marked run
// lower it in the same script (lua/lib/release.lua) and move the tenant back from
// the capped set to the ready set, with a wake token. A tenant at its cap
// is not served, so it holds no worker slot while it waits. An uncapped
// tenant's runs are not counted (the dispatch and the acknowledgement pay
// nothing for it); `inspector tenants` counts what runs from asynq's
// active list and the lane each task hash names. A cap set while a
// tenant's runs are in flight counts the runs dispatched after it.
//
// Why nothing is lost or stuck: a run is always in exactly one of a lane,
// asynq's pending list, asynq's active list (with a lease, which asynq's
// recovery honours after a crash) or asynq's scheduled and retry sets,
// because each move is one script. The sets and counters that only steer
// the order are repaired (RepairFair, run by the workers at an interval):
// a tenant with runs in a lane but in neither set is put back, and the
// in-flight counts are recounted from asynq's active list.

package broker
