package deadline

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/fleet"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/restart"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/tasks"
)

// SweepInterval is how often the fleet sweeps the deadline index (the
// one worker that holds the sweep's fleet lease): a waiting task is
// dead-lettered within about this long of its deadline. Each sweep reads
// the index once even when nothing is due: producers add entries without
// telling the fleet, and a new task's deadline may come before the
// earliest one known, so skipping ticks until that one would lose this
// precision. The read costs the fleet one ZRANGE a tick, not each worker.
const SweepInterval = 500 * time.Millisecond

// sweepBatch is how many index entries one read of a sweep takes;
// sweepMaxBatches bounds the reads of one tick (the rest wait for the next).
const (
	sweepBatch      = 100
	sweepMaxBatches = 10
)

// DeadLetterer dead-letters env, a task past its deadline that waited in
// state waiting, as a delivery taken past its deadline is (the dead
// letter, then its record's dead_lettered event, with the metrics and the
// log line). expired is false when its record refused the mark (the task
// ended otherwise meanwhile); an error (Redis trouble) leaves the entry to
// the next tick.
type DeadLetterer func(ctx context.Context, env *tasks.Envelope, waiting record.State) (expired bool, err error)

// Options are a Sweeper's.
type Options struct {
	// Holder is the sweep claim's value (the worker's ID).
	Holder string
	// Interval is the sweep's; zero: SweepInterval.
	Interval time.Duration
	// Logger; nil: slog.Default.
	Logger *slog.Logger
	// Now is the clock the deadlines are compared with; nil: time.Now.
	Now func() time.Time
}

// Sweeper is the deadline sweep, a service (Start, Stop).
type Sweeper struct {
	*fleet.Every
	rdb        redis.UniversalClient
	rec        *record.Store
	insp       *asynq.Inspector
	restarts   *restart.Scheduler
	deadLetter DeadLetterer
	log        *slog.Logger
	now        func() time.Time
}

// New is the sweep of the deadline index in rdb, reading records through
// rec and runs through insp, freeing a restart's slot in restarts, and
// dead-lettering through dl.
func New(rdb redis.UniversalClient, rec *record.Store, insp *asynq.Inspector, restarts *restart.Scheduler, dl DeadLetterer, o Options) *Sweeper {
	if o.Interval <= 0 {
		o.Interval = SweepInterval
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Sweeper{rdb: rdb, rec: rec, insp: insp, restarts: restarts, deadLetter: dl, log: o.Logger, now: o.Now}
	s.Every = fleet.One(rdb, o.Interval, fleet.Job{Key: rkeys.DeadlineSweepClaim(), Run: s.tick}, fleet.Options{Holder: o.Holder})
	return s
}

// tick is one sweep, logged.
func (s *Sweeper) tick(ctx context.Context) {
	if n, err := s.Sweep(ctx, s.now()); err != nil && ctx.Err() == nil {
		s.log.Warn("deadline sweep failed", "err", err)
	} else if n > 0 {
		s.log.Info("dead-lettered waiting tasks past their deadline", "count", n)
	}
}

// Sweep goes through the tasks of the deadline index whose deadline is
// at or before now: it drops the entries of tasks that have ended (or
// whose record is gone), leaves those running to the worker that runs
// them (their call stops at the deadline; a redelivery is dead-lettered
// when taken), and dead-letters the waiting ones (expire). It returns how
// many it dead-lettered.
func (s *Sweeper) Sweep(ctx context.Context, now time.Time) (int, error) {
	dead, offset := 0, int64(0)
	for range sweepMaxBatches {
		ids, err := s.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{Key: rkeys.Deadlines(), ByScore: true,
			Start: "-inf", Stop: strconv.FormatInt(now.UnixMilli(), 10), Offset: offset, Count: sweepBatch}).Result()
		if err != nil {
			return dead, err
		}
		for _, id := range ids {
			done, expired, err := s.expire(ctx, id, now)
			if err != nil {
				return dead, err
			}
			if expired {
				dead++
			}
			if done {
				if err := s.rdb.ZRem(ctx, rkeys.Deadlines(), id).Err(); err != nil {
					return dead, err
				}
			} else {
				offset++ // kept: the next read starts after it
			}
		}
		if len(ids) < sweepBatch {
			return dead, nil
		}
	}
	return dead, nil
}
