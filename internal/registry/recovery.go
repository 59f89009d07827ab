package registry

import (
	"context"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/fleet"
	"github.com/agentq/agentq/internal/inspect"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/rkeys"
)

// Recovery keeps the records of a gone worker's runs true once asynq's
// lease recovery has taken them back: asynq moves a lost delivery back to
// its queue without telling agentq, and the record would say active until
// the run's next delivery starts (minutes, or as long as its queue is
// paused). Every inspect.HeartbeatInterval, one worker of the fleet
// (a fleet lease, rkeys.WorkersRecoveryClaim) lists the gone workers'
// tasks that asynq no longer holds for them but whose record is still
// active on them (inspect.Recovered) and puts each back to pending with
// the lost attempt's event (record.Store.Recovered: interrupted, lost,
// the worker). A run whose next delivery starts first records the same
// event itself (the start's check, record's rec_apply), and the write
// fenced on the record's worker makes sure only one of them does.
type Recovery struct {
	*fleet.Every
	rdb redis.UniversalClient
	rec *record.Store
	log *slog.Logger
	now func() time.Time
}

// NewRecovery is the Recovery of the worker holder (its ID, the fleet
// lease's holder), writing through rec; now is the clock (nil: time.Now).
func NewRecovery(rdb redis.UniversalClient, rec *record.Store, holder string, log *slog.Logger, now func() time.Time) *Recovery {
	if log == nil {
		log = slog.Default()
	}
	if now == nil {
		now = time.Now
	}
	r := &Recovery{rdb: rdb, rec: rec, log: log, now: now}
	r.Every = fleet.One(rdb, inspect.HeartbeatInterval, fleet.Job{Key: rkeys.WorkersRecoveryClaim(), Run: r.Check},
		fleet.Options{Holder: holder, Delay: true})
	return r
}

// Check puts back the records of the runs asynq took back from gone
// workers (one tick's work; errors are logged, the next tick tries again).
func (r *Recovery) Check(ctx context.Context) {
	lost, err := inspect.Recovered(ctx, r.rdb, r.now())
	if err != nil {
		r.log.Warn("could not read the gone workers' tasks", "err", err)
		return
	}
	for _, l := range lost {
		ok, err := r.rec.Recovered(ctx, l.ID, l.Worker)
		switch {
		case err != nil:
			r.log.Warn("could not record a lost attempt", "task_id", l.ID, "worker", l.Worker, "err", err)
		case ok:
			r.log.Warn("a run lost with its worker is back on its queue", "task_id", l.ID, "worker", l.Worker)
		}
	}
}
