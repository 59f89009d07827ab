// Package brokertest puts runs in tenants' lanes and dequeues them as a
// worker would, with the real scripts, for the tests of the views of fair
// dispatch (package inspect, the CLI, the HTTP API, the console).
package brokertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/broker"
)

// Enqueue puts n runs of lane on queue, as an enqueue does, pending since
// at; their IDs are prefix-1 … prefix-n.
func Enqueue(t testing.TB, rdb redis.UniversalClient, queue string, lane broker.Lane, prefix string, n int, at time.Time) []string {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, broker.RegisterQueues(ctx, rdb, queue))
	ids := make([]string, 0, n)
	for i := range n {
		id := fmt.Sprintf("%s-%d", prefix, i+1)
		tk := broker.AsynqTask{Type: "agentq:run", Payload: []byte("{}"), ID: id, Queue: queue, MaxRetry: 1 << 30, Timeout: time.Hour}
		c := broker.RunCall(tk, lane, at, 0, false)
		require.NoError(t, c.Script.Run(ctx, rdb, c.Keys, c.Args...).Err())
		ids = append(ids, id)
	}
	return ids
}

// Dequeue is one fair dequeue of queue under fc, as asynq's processor runs
// it through a worker: the run's ID moves to asynq's active list and its
// tenant's in-flight count rises. It returns "" when nothing is handed
// out.
func Dequeue(t testing.TB, rdb redis.UniversalClient, queue string, fc broker.FairConfig) string {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, broker.PublishFair(ctx, rdb, queue, fc))
	c := broker.NewAsynqClient(rdb, broker.NewWaiter(rdb, []string{queue}, time.Second, "brokertest"),
		broker.NewDues(time.Second, time.Now), 1, nil)
	c.Fair = fc
	keys := []string{broker.PendingKey(queue), "asynq:{" + queue + "}:paused", broker.ActiveKey(queue), "asynq:{" + queue + "}:lease"}
	err := c.EvalSha(ctx, broker.AsynqDequeueScript.Hash(), keys, time.Now().Add(time.Minute).Unix(), broker.TaskKeyPrefix(queue)).Err()
	if err == redis.Nil {
		return ""
	}
	require.NoError(t, err)
	id, err := rdb.LIndex(ctx, broker.ActiveKey(queue), 0).Result()
	require.NoError(t, err)
	return id
}

// YAML is the config of the scene Seed sets up (tenants block), Config
// the same as the fair dispatch reads it.
const YAML = "tenants:\n  acme: {weight: 3, concurrency: 2}\n"

// Config is YAML's tenants.
var Config = broker.FairConfig{Named: map[string]broker.TenantSettings{"acme": {Weight: 3, Concurrency: 2}}, Default: broker.TenantSettings{Weight: 1}}

// Want is what the views should show of a tenant of the scene.
type Want struct {
	Pending, InFlight int64
}

// Seed sets up a scene on queue: tenant "acme" (weight 3, cap 2) with 5
// normal runs waiting since an hour ago and 2 high ones, "beta" with 3
// low ones, the default tenant with 4 in asynq's pending list; then 6 fair
// dequeues, which leave acme at its cap (2 in flight, capped). It returns
// what each tenant ("" the default) then has waiting and in flight.
func Seed(t testing.TB, rdb redis.UniversalClient, queue string) map[string]Want {
	t.Helper()
	hour := time.Now().Add(-time.Hour)
	want := map[string]Want{"acme": {Pending: 7}, "beta": {Pending: 3}, "": {Pending: 4}}
	Enqueue(t, rdb, queue, broker.Lane{Tenant: "acme"}, "acme-n", 5, hour)
	Enqueue(t, rdb, queue, broker.Lane{Tenant: "acme", Priority: broker.High}, "acme-h", 2, hour.Add(time.Minute))
	Enqueue(t, rdb, queue, broker.Lane{Tenant: "beta", Priority: broker.Low}, "beta-l", 3, time.Now())
	Enqueue(t, rdb, queue, broker.Lane{}, "default", 4, time.Now())
	for range 6 {
		id := Dequeue(t, rdb, queue, Config)
		require.NotEmpty(t, id)
		tenant := ""
		for _, tn := range []string{"acme", "beta"} {
			if len(id) > len(tn) && id[:len(tn)+1] == tn+"-" {
				tenant = tn
			}
		}
		w := want[tenant]
		w.Pending--
		w.InFlight++
		want[tenant] = w
	}
	require.Equal(t, int64(2), want["acme"].InFlight, "acme at its cap")
	return want
}
