package broker_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/broker/brokertest"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
)

// prefetchScene is a queue with pending runs and an AsynqClient as a
// worker's asynq server runs on it.
type prefetchScene struct {
	t     *testing.T
	rdb   redis.UniversalClient
	c     *broker.AsynqClient
	queue string
}

func newPrefetchScene(t *testing.T, queue string, nqueues, runs int) *prefetchScene {
	t.Helper()
	rdb := redistest.Start(t).Client()
	brokertest.Enqueue(t, rdb, queue, broker.Lane{}, "r", runs, time.Now())
	w := broker.NewWaiter(rdb, []string{queue}, time.Minute, "prefetch-test")
	c := broker.NewAsynqClient(rdb, w, broker.NewDues(time.Second, time.Now), nqueues, nil)
	c.Prefetch = true
	return &prefetchScene{t: t, rdb: rdb, c: c, queue: queue}
}

// dequeue is asynq's processor asking for a run: the message's task ID
// (read from the task hash the message came from), "" for none.
func (s *prefetchScene) dequeue() string {
	s.t.Helper()
	q := s.queue
	keys := []string{broker.PendingKey(q), broker.PausedKey(q), broker.ActiveKey(q), broker.LeaseKey(q)}
	msg, err := broker.AsynqDequeueScript.Run(context.Background(), s.c, keys, time.Now().Add(30*time.Second).Unix(), broker.TaskKeyPrefix(q)).Text()
	if err == redis.Nil {
		return ""
	}
	require.NoError(s.t, err)
	for _, id := range []string{"r-1", "r-2", "r-3", "r-4"} {
		if m, _ := s.rdb.HGet(context.Background(), broker.TaskKey(q, id), "msg").Result(); m == msg {
			return id
		}
	}
	s.t.Fatalf("dequeue answered a message of no run: %q", msg)
	return ""
}

// done is asynq's processor acknowledging run id.
func (s *prefetchScene) done(id string) {
	s.t.Helper()
	q := s.queue
	processed := "asynq:{" + q + "}:processed"
	keys := []string{broker.ActiveKey(q), broker.LeaseKey(q), broker.TaskKey(q, id), processed + ":" + time.Now().UTC().Format("2006-01-02"), processed}
	require.NoError(s.t, broker.AsynqDoneScript.Run(context.Background(), s.c, keys, id, time.Now().Add(time.Hour).Unix(), int64(math.MaxInt64)).Err())
}

func (s *prefetchScene) list(key string) []string {
	return s.rdb.LRange(context.Background(), key, 0, -1).Val()
}

// TestDoneFetchesNext: with Prefetch, asynq's done of a run also hands out
// the queue's next run, and the processor's next dequeue is answered with
// it without Redis (the run after it stays pending); the fetched run is
// active and leased as asynq's own dequeue leaves it. Drain puts back a
// run fetched and not taken, at the front of the queue, and no done
// fetches after it.
func TestDoneFetchesNext(t *testing.T) {
	t.Parallel()
	s := newPrefetchScene(t, "pf", 1, 4)
	ctx := context.Background()
	pending, active, lease := broker.PendingKey("pf"), broker.ActiveKey("pf"), broker.LeaseKey("pf")

	require.Equal(t, "r-1", s.dequeue(), "the first dequeue asks Redis")
	s.done("r-1")
	require.Equal(t, []string{"r-2"}, s.list(active), "r-2 fetched with r-1's done")
	require.NoError(t, s.rdb.ZScore(ctx, lease, "r-2").Err(), "and leased")
	require.Equal(t, "active", s.rdb.HGet(ctx, broker.TaskKey("pf", "r-2"), "state").Val())
	require.Equal(t, []string{"r-4", "r-3"}, s.list(pending))

	require.Equal(t, "r-2", s.dequeue(), "the next dequeue takes the fetched run")
	require.Equal(t, []string{"r-4", "r-3"}, s.list(pending), "without asking Redis")

	s.done("r-2") // fetches r-3
	require.Equal(t, []string{"r-3"}, s.list(active))
	n, err := s.c.Drain(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Empty(t, s.list(active), "r-3 put back")
	require.Equal(t, []string{"r-4", "r-3"}, s.list(pending), "at the front (asynq pops from the right)")
	require.ErrorIs(t, s.rdb.ZScore(ctx, lease, "r-3").Err(), redis.Nil)
	require.Equal(t, "pending", s.rdb.HGet(ctx, broker.TaskKey("pf", "r-3"), "state").Val())

	require.Equal(t, "r-3", s.dequeue(), "after Drain a dequeue asks Redis")
	s.done("r-3")
	require.Equal(t, []string{"r-4"}, s.list(pending), "no done fetches after Drain")
	n, err = s.c.Drain(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "Drain is idempotent")
}

// TestDoneFetchesOnlyForOneQueue: a worker serving several queues does not
// fetch with its dones (asynq's processor chooses among the queues).
func TestDoneFetchesOnlyForOneQueue(t *testing.T) {
	t.Parallel()
	s := newPrefetchScene(t, "pf2", 2, 2)
	require.Equal(t, "r-1", s.dequeue())
	s.done("r-1")
	require.Empty(t, s.list(broker.ActiveKey("pf2")))
	require.Equal(t, []string{"r-2"}, s.list(broker.PendingKey("pf2")))
}

// TestFetchEndsAnIdleWait: a run fetched while the processor waits for a
// token (after an empty round) ends the wait at once, rather than at the
// waiter's bound (a minute here).
func TestFetchEndsAnIdleWait(t *testing.T) {
	t.Parallel()
	s := newPrefetchScene(t, "pf3", 1, 2)
	require.Equal(t, "r-1", s.dequeue())
	// r-2 leaves the pending list for a moment, as if another worker had
	// it, so that the next round is empty and the processor waits.
	ctx := context.Background()
	require.NoError(t, s.rdb.Rename(ctx, broker.PendingKey("pf3"), "aside").Err())
	require.NoError(t, s.rdb.Del(ctx, rkeys.Wake("pf3")).Err(), "no token from the enqueues")
	waited := make(chan string, 1)
	go func() { waited <- s.dequeue() }()
	require.Eventually(t, func() bool { return s.c.Waiting() }, 10*time.Second, time.Millisecond)
	require.NoError(t, s.rdb.Rename(ctx, "aside", broker.PendingKey("pf3")).Err())
	start := time.Now()
	s.done("r-1") // fetches r-2 while the processor waits
	select {
	case id := <-waited:
		require.Equal(t, "r-2", id, "the wait ends with the fetched run")
		require.Less(t, time.Since(start), 50*time.Second, "the wait ended before its bound")
	case <-time.After(55 * time.Second):
		t.Fatal("the wait did not end")
	}
}

// TestTokenWakesWithTheRun: a worker of one queue waiting for a token
// (after an empty round) answers that same dequeue with the run whose
// enqueue pushed the token, not with an empty round (which would cost the
// run asynq's sleep after one).
func TestTokenWakesWithTheRun(t *testing.T) {
	t.Parallel()
	s := newPrefetchScene(t, "pf5", 1, 0)
	waited := make(chan string, 1)
	go func() { waited <- s.dequeue() }()
	require.Eventually(t, func() bool { return s.c.Waiting() }, 10*time.Second, time.Millisecond)
	brokertest.Enqueue(t, s.rdb, "pf5", broker.Lane{}, "r", 1, time.Now()) // r-1 and its token
	select {
	case id := <-waited:
		require.Equal(t, "r-1", id)
	case <-time.After(55 * time.Second):
		t.Fatal("the wait did not end")
	}
}

// TestStaleTokensDoNotEndTheWait: a worker of one queue waiting for a
// token waits past tokens whose runs are gone (taken without them: by a
// done's fetch, or by a dequeue before the wait) and answers that same
// dequeue with the next run, not with an empty round (which would cost
// that run asynq's sleep after one); past maxStaleWakes of them it
// answers empty, and the rest stay for the next wait.
func TestStaleTokensDoNotEndTheWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("a few", func(t *testing.T) {
		t.Parallel()
		s := newPrefetchScene(t, "pf6", 1, 0)
		require.NoError(t, s.rdb.LPush(ctx, rkeys.Wake("pf6"), "1", "1", "1").Err())
		waited := make(chan string, 1)
		go func() { waited <- s.dequeue() }()
		require.Eventually(t, func() bool { return s.c.Waiting() && s.rdb.LLen(ctx, rkeys.Wake("pf6")).Val() == 0 },
			10*time.Second, time.Millisecond, "the stale tokens taken, the dequeue waits on")
		require.Empty(t, waited, "no empty answer for a stale token")
		brokertest.Enqueue(t, s.rdb, "pf6", broker.Lane{}, "r", 1, time.Now()) // r-1 and its token
		select {
		case id := <-waited:
			require.Equal(t, "r-1", id)
		case <-time.After(55 * time.Second):
			t.Fatal("the wait did not end")
		}
	})
	t.Run("many", func(t *testing.T) {
		t.Parallel()
		s := newPrefetchScene(t, "pf7", 1, 0)
		for range 20 {
			require.NoError(t, s.rdb.LPush(ctx, rkeys.Wake("pf7"), "1").Err())
		}
		require.Empty(t, s.dequeue(), "an empty answer past the bound on stale tokens")
		require.EqualValues(t, 20-9, s.rdb.LLen(ctx, rkeys.Wake("pf7")).Val(), "the first wake and 8 stale ones taken")
	})
}

// TestRetryFetchesNext: asynq's retry of a run, like its done, hands out
// the queue's next run when Prefetch is on; the retried run is in the
// retry set.
func TestRetryFetchesNext(t *testing.T) {
	t.Parallel()
	s := newPrefetchScene(t, "pf4", 1, 2)
	ctx := context.Background()
	require.Equal(t, "r-1", s.dequeue())
	q, id := "pf4", "r-1"
	msg := s.rdb.HGet(ctx, broker.TaskKey(q, id), "msg").Val()
	day := time.Now().UTC().Format("2006-01-02")
	keys := []string{broker.TaskKey(q, id), broker.ActiveKey(q), broker.LeaseKey(q), broker.RetryKey(q),
		"asynq:{pf4}:processed:" + day, "asynq:{pf4}:failed:" + day, "asynq:{pf4}:processed", "asynq:{pf4}:failed"}
	due := time.Now().Add(time.Hour).Unix()
	require.NoError(t, broker.AsynqRetryScript.Run(ctx, s.c, keys, id, msg, due, due, 1, int64(math.MaxInt64)).Err())
	require.Equal(t, []string{"r-2"}, s.list(broker.ActiveKey(q)), "r-2 fetched with r-1's retry")
	require.Equal(t, []string{"r-1"}, s.rdb.ZRange(ctx, broker.RetryKey(q), 0, -1).Val())
	require.Equal(t, "r-2", s.dequeue(), "the next dequeue takes it")
	require.Empty(t, s.list(broker.PendingKey(q)))
}
