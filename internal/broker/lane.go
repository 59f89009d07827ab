package broker

import (
	"github.com/agentq/agentq/internal/rkeys"
)

// The priorities of a task within its tenant, in the order they are served.
const (
	High   = "high"
	Normal = "normal"
	Low    = "low"
)

// Fields of asynq's task hash that carry a run's lane and its count.
const (
	// FieldTenant is the run's tenant (absent: the default tenant).
	FieldTenant = "aq_t"
	// FieldPriority is the run's priority code (h, n, l; absent: n).
	FieldPriority = "aq_p"
	// FieldCounted is the tenant whose in-flight count the dequeue raised
	// for this run (absent: none), so that only a counted run lowers it.
	FieldCounted = "aq_c"
)

// Lane is where a run waits for a worker: its tenant ("" the default
// tenant) and its priority ("" is Normal).
type Lane struct {
	Tenant   string
	Priority string
}

// Default reports whether l is the default tenant at normal priority,
// whose runs wait in asynq's own pending list.
func (l Lane) Default() bool { return l.Tenant == "" && l.code() == "n" }

// code is the priority's code in keys and asynq's task hash.
func (l Lane) code() string {
	switch l.Priority {
	case High:
		return "h"
	case Low:
		return "l"
	}
	return "n"
}

// Key is the list a pending run of l waits in on queue: asynq's pending
// list for the default lane, else the lane's own.
func (l Lane) Key(queue string) string {
	if l.Default() {
		return PendingKey(queue)
	}
	return rkeys.FairLane(queue, l.code(), l.Tenant)
}

// Args are the Lua arguments agentq_lane_add takes for l: its tenant and
// its priority code ("" and "" for the default lane).
func (l Lane) Args() []any {
	if l.Default() {
		return []any{"", ""}
	}
	return []any{l.Tenant, l.code()}
}

// LaneKeys are the keys the lane functions of lua/lib/lane.lua take for queue: the
// ready set, the tenant registry and the lane prefix.
func LaneKeys(queue string) (ready, tenants, prefix string) {
	return rkeys.FairReady(queue), rkeys.FairTenants(queue), rkeys.FairLanePrefix(queue)
}
