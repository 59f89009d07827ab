package wake

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/fleet"
	"github.com/agentq/agentq/internal/rkeys"
)

// BackstopFactor is how many poll intervals an idle worker goes, at most,
// without looking at its queues (the bound of its BLPOP, broker.Waiter)
// and at their delayed sets (broker.Dues' own period): the fleet's look
// (Checks) comes every poll interval; this only bounds a pickup when the
// fleet's lease holder is gone and none has taken it over yet.
const BackstopFactor = 30

// leaseFactor is the forward lease's length in poll intervals: its holder
// renews it every half lease, the others claim once per lease, and a
// holder that dies hands over within one lease (the backstop is twice
// that).
const leaseFactor = BackstopFactor / 2

// Checks is the fleet's periodic look at its queues (a startstop
// service): every interval (worker.poll_interval), the one worker that
// holds a queue's lease (rkeys.ForwardCheckClaim)
//
//   - pushes a wake token when the queue has work but no token
//     (broker.Nudge): a token lost, or a producer that is not agentq's;
//   - makes its forwarder ask Redis about the queue's scheduled and retry
//     sets (broker.Dues.Recheck; asynq's forwarder asks within
//     worker.forward_interval): a retry whose worker died, a task no
//     worker heard announced.
//
// So such a task is found within an interval (and a forward tick), as when
// each idle worker looked every interval, at one look per queue and
// interval for the fleet instead of one per worker.
func Checks(rdb redis.UniversalClient, dues *broker.Dues, queues []string, every time.Duration, holder string) *fleet.Every {
	jobs := make([]fleet.Job, 0, len(queues))
	for _, q := range queues {
		sets := []string{broker.ScheduledKey(q), broker.RetryKey(q)}
		jobs = append(jobs, fleet.Job{Key: rkeys.ForwardCheckClaim(q), Run: func(ctx context.Context) {
			dues.Recheck(sets...)
			_, _ = broker.Nudge(ctx, rdb, q) // a failure: the next interval's look, or the backstop
		}})
	}
	return fleet.New(rdb, every, func() []fleet.Job { return jobs }, fleet.Options{Holder: holder, Delay: true, TTL: leaseFactor * every})
}
