package notify

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
)

// TestMain checks that no Hub goroutine outlives its Stop.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// never is a re-check period no test outlives: only pub/sub can tell.
const never = time.Hour

type bundle struct {
	rdb redis.UniversalClient
	rec *record.Store
	hub *Hub
}

func setup(t *testing.T, rdb redis.UniversalClient, recheck time.Duration) *bundle {
	t.Helper()
	rec := record.NewStore(rdb)
	hub := New(rdb, rec, Options{Recheck: recheck})
	hub.Start(context.Background())
	t.Cleanup(hub.Stop)
	return &bundle{rdb: rdb, rec: rec, hub: hub}
}

func realRedis(t *testing.T, recheck time.Duration) *bundle {
	return setup(t, redistest.Start(t).Client(), recheck)
}

func miniRedis(t *testing.T, recheck time.Duration) *bundle {
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	return setup(t, c, recheck)
}

func (b *bundle) create(t *testing.T, id string) {
	t.Helper()
	ok, err := b.rec.Create(context.Background(), record.New{ID: id, Seed: record.Seed{Agent: "a", Queue: "default", EnqueuedAt: time.Now()}, State: record.StatePending})
	require.NoError(t, err)
	require.True(t, ok)
}

func (b *bundle) apply(t *testing.T, id string, c record.Change) {
	t.Helper()
	out, err := b.rec.Apply(context.Background(), record.Delivery{ID: id, Attempt: 1}, c)
	require.NoError(t, err)
	require.Equal(t, record.Applied, out)
}

// follow runs Follow in the background; the returned func waits for its
// end and returns the events' names and its error.
func (b *bundle) follow(t *testing.T, id string, after int64) (seen func() []string, done chan error) {
	var mu sync.Mutex
	var names []string
	done = make(chan error, 1)
	go func() {
		done <- b.hub.Follow(context.Background(), id, after, func(ev record.Event) error {
			mu.Lock()
			names = append(names, fmt.Sprintf("%d:%s", ev.Seq, ev.Event))
			mu.Unlock()
			return nil
		}, FollowOptions{})
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), names...)
	}, done
}

func waitDone(t *testing.T, done chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("not told")
	}
	return nil
}

// TestFollowByPubSub: with no re-check in the test's lifetime, a follower
// is told of each event by the announcement alone, in order, none twice,
// and ends after the terminal one; the task's channel is unsubscribed when
// its last Sub goes.
func TestFollowByPubSub(t *testing.T) {
	t.Parallel()
	b := realRedis(t, never)
	b.create(t, "f")
	seen, done := b.follow(t, "f", 0)
	require.Eventually(t, func() bool { return len(seen()) == 1 }, 10*time.Second, 5*time.Millisecond)
	b.apply(t, "f", record.Started())
	b.apply(t, "f", retrying())
	require.Eventually(t, func() bool { return len(seen()) == 2 }, 10*time.Second, 5*time.Millisecond, "the start was not announced")
	b.apply(t, "f", record.Succeeded(record.Attempt{Attempt: 1}, []byte(`{"ok":true}`)))
	require.NoError(t, waitDone(t, done))
	require.Equal(t, []string{"1:queued", "2:retrying", "3:succeeded"}, seen())
	require.Eventually(t, func() bool { return b.hub.Watched() == 0 }, 10*time.Second, 5*time.Millisecond)
	n, err := b.rdb.PubSubShardNumSub(context.Background(), "agentq:{task:f}:events").Result()
	require.NoError(t, err)
	require.Zero(t, n["agentq:{task:f}:events"], "the channel is still subscribed")

	// Resuming after an event replays only what follows; an ended task
	// replays and ends at once.
	seen, done = b.follow(t, "f", 2)
	require.NoError(t, waitDone(t, done))
	require.Equal(t, []string{"3:succeeded"}, seen())
}

// TestManyWaitersFewConnections: many waiters on many tasks share one
// subscription per task over at most Options.Shards connections; each is
// told of its task's end.
func TestManyWaitersFewConnections(t *testing.T) {
	t.Parallel()
	b := realRedis(t, never)
	ctx := context.Background()
	const tasks, per = 200, 3
	for i := range tasks {
		b.create(t, fmt.Sprint("m", i))
	}
	errs := make(chan error, tasks*per)
	for i := range tasks * per {
		go func() {
			st, err := b.hub.Wait(ctx, fmt.Sprint("m", i%tasks))
			if err == nil && st != record.StateSucceeded {
				err = fmt.Errorf("state %s", st)
			}
			errs <- err
		}()
	}
	require.Eventually(t, func() bool {
		n, err := b.rdb.PubSubShardChannels(ctx, "agentq:*").Result()
		return err == nil && len(n) == tasks
	}, 20*time.Second, 10*time.Millisecond, "every task's channel subscribed once")
	require.LessOrEqual(t, b.hub.Conns(), DefaultShards)
	require.LessOrEqual(t, pubsubClients(t, b.rdb), DefaultShards, "pub/sub connections on the server")
	for i := range tasks {
		b.apply(t, fmt.Sprint("m", i), record.Succeeded(record.Attempt{Attempt: 1}, nil))
	}
	for range tasks * per {
		require.NoError(t, waitDone(t, errs))
	}
}

func retrying() record.Change {
	return record.Retrying(record.Attempt{Attempt: 1, ErrorClass: "timeout"}, time.Millisecond, time.Now())
}

// pubsubClients counts the server's connections that are subscribed.
func pubsubClients(t *testing.T, rdb redis.UniversalClient) int {
	t.Helper()
	list, err := rdb.ClientList(context.Background()).Result()
	require.NoError(t, err)
	n := 0
	for _, line := range strings.Split(list, "\n") {
		if strings.Contains(line, "flags=P") || strings.Contains(line, " ssub=") && !strings.Contains(line, " ssub=0") {
			n++
		}
	}
	return n
}

// TestRecheckCatchesMissed: on a Redis that announces nothing (miniredis)
// the re-check tells the waiter.
func TestRecheckCatchesMissed(t *testing.T) {
	t.Parallel()
	b := miniRedis(t, 20*time.Millisecond)
	b.create(t, "r")
	done := make(chan error, 1)
	go func() {
		st, err := b.hub.Wait(context.Background(), "r")
		if err == nil && st != record.StateDeadLettered {
			err = fmt.Errorf("state %s", st)
		}
		done <- err
	}()
	require.Eventually(t, func() bool { return b.hub.Watched() == 1 }, 10*time.Second, 5*time.Millisecond)
	b.apply(t, "r", record.DeadLettered(record.Attempt{Attempt: 1, ErrorClass: "logic_error"}, "not_retryable"))
	require.NoError(t, waitDone(t, done))
}

// TestConnectionLost: a PubSub connection killed under the Hub is made
// again and its channels subscribed again; waiters are told of what was
// recorded meanwhile and after, with no re-check.
func TestConnectionLost(t *testing.T) {
	t.Parallel()
	b := realRedis(t, never)
	ctx := context.Background()
	b.create(t, "k")
	seen, done := b.follow(t, "k", 0)
	require.Eventually(t, func() bool { return len(seen()) == 1 }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, b.rdb.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err())
	b.apply(t, "k", record.Started())
	b.apply(t, "k", retrying()) // most likely announced to nobody
	require.Eventually(t, func() bool { return len(seen()) == 2 }, 10*time.Second, 5*time.Millisecond,
		"the event recorded while the connection was down was not caught")
	require.Eventually(t, func() bool {
		n, err := b.rdb.PubSubShardNumSub(ctx, "agentq:{task:k}:events").Result()
		return err == nil && n["agentq:{task:k}:events"] == 1
	}, 10*time.Second, 5*time.Millisecond, "subscribed again")
	b.apply(t, "k", record.Succeeded(record.Attempt{Attempt: 1}, nil))
	require.NoError(t, waitDone(t, done))
	require.Equal(t, []string{"1:queued", "2:retrying", "3:succeeded"}, seen())
}

// TestUnknownAndStop: an unknown task is ErrNotFound; Stop ends waits.
func TestUnknownAndStop(t *testing.T) {
	t.Parallel()
	b := realRedis(t, never)
	_, err := b.hub.Wait(context.Background(), "nope")
	require.ErrorIs(t, err, record.ErrNotFound)
	b.create(t, "s")
	done := make(chan error, 1)
	go func() { _, err := b.hub.Wait(context.Background(), "s"); done <- err }()
	require.Eventually(t, func() bool { return b.hub.Watched() == 1 }, 10*time.Second, 5*time.Millisecond)
	b.hub.Stop()
	require.ErrorIs(t, waitDone(t, done), ErrStopped)
	_, err = b.hub.Subscribe(context.Background(), "s")
	require.ErrorIs(t, err, ErrStopped)
}

// TestCluster: on a Cluster, tasks on different masters are subscribed on
// one connection per master (each channel on the master of its slot), and
// their waiters are told by the announcements alone.
func TestCluster(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t)
	b := setup(t, c.Client(t), never)
	ctx := context.Background()
	masters := map[string]bool{}
	var ids []string
	for i := 0; len(masters) < 3 && i < 200; i++ {
		id := fmt.Sprint("c", i)
		m := c.MasterOf(t, "agentq:{task:"+id+"}")
		if !masters[m] {
			masters[m] = true
			ids = append(ids, id)
		}
	}
	require.Len(t, ids, 3, "a task on each master")
	done := make(chan error, len(ids))
	for _, id := range ids {
		b.create(t, id)
		go func() {
			st, err := b.hub.Wait(ctx, id)
			if err == nil && st != record.StateSucceeded {
				err = fmt.Errorf("%s: state %s", id, st)
			}
			done <- err
		}()
	}
	require.Eventually(t, func() bool {
		for _, id := range ids {
			if v, _ := b.rdb.HGet(ctx, rkeys.Task(id), record.FieldWatch).Result(); v != "1" {
				return false
			}
		}
		return true
	}, 20*time.Second, 10*time.Millisecond)
	require.Equal(t, len(ids), b.hub.Conns(), "one pub/sub connection per master")
	for _, id := range ids {
		b.apply(t, id, record.Succeeded(record.Attempt{Attempt: 1}, nil))
	}
	for range ids {
		require.NoError(t, waitDone(t, done))
	}
}

// TestFollowAfterPastLast: a follower resuming after a number the task
// has not reached (a stale or foreign Last-Event-ID) neither silences the
// task's other waiters on the same Hub nor outlives the task: both are
// told of each event and end after the terminal one.
func TestFollowAfterPastLast(t *testing.T) {
	t.Parallel()
	b := realRedis(t, never)
	b.create(t, "p")
	seen, done := b.follow(t, "p", 0)
	require.Eventually(t, func() bool { return len(seen()) == 1 }, 10*time.Second, 5*time.Millisecond)
	sleeping := make(chan struct{})
	var once sync.Once
	far := make(chan error, 1)
	go func() {
		far <- b.hub.Follow(context.Background(), "p", 1000, func(ev record.Event) error {
			return fmt.Errorf("event %d is not after 1000", ev.Seq)
		}, FollowOptions{KeepAlive: 5 * time.Millisecond, Idle: func() error {
			once.Do(func() { close(sleeping) })
			return nil
		}})
	}()
	select {
	case <-sleeping: // it has read the record and waits for news
	case <-time.After(20 * time.Second):
		t.Fatal("the far follower never waited")
	}
	b.apply(t, "p", record.Started())
	b.apply(t, "p", retrying())
	require.Eventually(t, func() bool { return len(seen()) == 2 }, 10*time.Second, 5*time.Millisecond,
		"the other follower was not told: %v", seen())
	b.apply(t, "p", record.Succeeded(record.Attempt{Attempt: 1}, nil))
	require.NoError(t, waitDone(t, done))
	require.NoError(t, waitDone(t, far), "the far follower outlived the task")
}
