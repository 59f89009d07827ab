package worker

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/breaker/probe"
	"github.com/agentq/agentq/internal/children"
	"github.com/agentq/agentq/internal/configx"
	"github.com/agentq/agentq/internal/deadline"
	"github.com/agentq/agentq/internal/fleet"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/registry"
	"github.com/agentq/agentq/internal/restart"
	"github.com/agentq/agentq/internal/schedule"
	"github.com/agentq/agentq/internal/tenants"
	"github.com/agentq/agentq/internal/wake"
	wh "github.com/agentq/agentq/internal/webhook"
	"github.com/agentq/agentq/tasks"
)

// Version is the version a worker reports in the worker registry (set it
// with -ldflags "-X github.com/agentq/agentq/worker.Version=…", or
// embed a worker under a version of your own); empty: agentq's version,
// the one `worker --version` prints (registry.BuildVersion).
var Version = ""

// loops are the worker's background services that keep the fleet's data
// (each in the package that owns it), built by newLoops and started with
// the worker's other components.
type loops struct {
	// hb keeps this worker's entry in the worker registry, with the
	// deliveries in flight.
	hb *registry.Heartbeat
	// recovery puts back to pending the records of gone workers' runs
	// that asynq's lease recovery took back (one worker of the fleet per
	// interval).
	recovery *registry.Recovery
	// hooks delivers webhooks; nil when none are configured.
	hooks *wh.Deliverer
	// sched fires the config's schedules; nil when none are configured.
	sched *schedule.Scheduler
	// probers run the agents' health probes (none without the breaker
	// gate).
	probers []*probe.Prober
	// sweeper dead-letters waiting tasks past their deadline (one worker
	// of the fleet per tick).
	sweeper *deadline.Sweeper
	// repairer registers the worker's queues and repairs the restart
	// index (one worker of the fleet per interval).
	repairer *restart.Repairer
	// kids is the children repair: it finishes the children waits a
	// crash cut (one worker of the fleet per interval).
	kids *children.Repairer
	// tenants publishes the tenants' settings and repairs fair dispatch
	// (one worker of the fleet per queue and interval).
	tenants *tenants.Service
	// listener wakes deferred tasks when their breaker closes, and the
	// forwarder when a producer announces a due task.
	listener *wake.Listener
	// checks makes the forwarder check the delayed sets every poll
	// interval (one worker of the fleet per queue and interval).
	checks *fleet.Every
	// gauges computes and exports the fleet's gauges (one worker of the
	// fleet per interval).
	gauges *gaugesService
}

// newLoops builds the worker's loops, before the delivery (which reads the
// heartbeat's Track; the deadline sweep reaches the delivery when it
// runs); client enqueues the schedules' tasks; noGate: no health probes (no
// breaker gate). It fails on a webhook or schedule the config cannot
// resolve.
func (w *Worker) newLoops(client *tasks.Client, noGate bool, gaugesEvery time.Duration) (err error) {
	w.hb = registry.NewHeartbeat(w.rdb, serveQueues(w.cfg), w.cfg.Worker.Concurrency, Version, w.log, nil, 0)
	w.recovery = registry.NewRecovery(w.rdb, w.rec, w.id, w.log, nil)
	if w.hooks, err = newDeliverer(w.cfg, w.rdb, w.log, w.metrics); err != nil {
		return err
	}
	if w.sched, err = newScheduler(w.cfg, w.rdb, client, w.log, w.metrics); err != nil {
		return err
	}
	for _, name := range w.Agents() {
		if a, _ := w.cfg.Agent(name); a.Health != nil && !noGate {
			w.probers = append(w.probers, newProber(w.specs[name], newProbeSpec(*a.Health, a.Exec), w.breakers, w.metrics, w.log))
		}
	}
	// The sweep dead-letters through the delivery (built after the loops).
	expire := func(ctx context.Context, env *tasks.Envelope, waiting record.State) (bool, error) {
		return w.exec.ExpireWaiting(ctx, env, string(waiting))
	}
	w.sweeper = deadline.New(w.rdb, w.rec, w.insp, w.restarts, expire, deadline.Options{Holder: w.id, Logger: w.log})
	w.repairer = restart.NewRepairer(w.restarts, w.rdb, restart.InspectorLookup(w.insp), queueList(w.cfg),
		restart.RepairOptions{Holder: w.id, Logger: w.log})
	w.kids = children.New(w.rdb, client, w.rec, children.Options{Holder: w.id, Logger: w.log})
	w.tenants = tenants.New(w.rdb, configx.Fair(w.cfg), queueList(w.cfg), tenants.Options{Holder: w.id, Logger: w.log})
	w.listener = wake.New(w.rdb, w.rec, wake.Options{Keys: w.breakerKeys(), Queues: queueList(w.cfg), Dues: w.dues, Logger: w.log})
	w.checks = wake.Checks(w.rdb, w.dues, queueList(w.cfg), w.cfg.Worker.PollInterval, w.id)
	w.gauges = newGaugesService(w.rdb, w.metrics.fleet, gaugesEvery, w.id, w.log)
	return nil
}

// breakerKeys maps each breaker key the worker gates on to the agents it
// gates: an agent's own, and, since a task deferred because its whole
// fallback chain was open may run as soon as any agent of the chain
// closes, the keys of its fallbacks.
func (w *Worker) breakerKeys() map[string][]string {
	keys := map[string][]string{}
	for name, sp := range w.specs {
		keys[sp.BreakerKey()] = append(keys[sp.BreakerKey()], name)
		for _, f := range sp.Fallback() {
			keys[f.BreakerKey()] = append(keys[f.BreakerKey()], name)
		}
	}
	return keys
}

// queues are the queues the worker serves, sorted.
func (w *Worker) queues() []string { return queueList(w.cfg) }

// queueList is the queues a worker serves (serveQueues), sorted.
func queueList(cfg *config.Config) []string {
	return slices.Sorted(maps.Keys(serveQueues(cfg)))
}
