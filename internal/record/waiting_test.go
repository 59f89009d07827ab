package record

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/rkeys"
)

// waiting is what Get explains of task id's wait.
func waiting(t *testing.T, st *Store, id string) [3]string {
	t.Helper()
	v := get(t, st, id)
	return [3]string{v.WaitingFor, v.WaitingDetail, v.NextAttemptAt}
}

func at(d time.Duration) string { return t0.Add(d).Format(time.RFC3339Nano) }

// TestWaitingExplained (#39): Get says what holds a task and when its next
// attempt is due — a retry's backoff, a deferral's budget (the error of
// the earlier attempt kept as it is), a suspend's signal — and nothing
// for a running task.
func TestWaitingExplained(t *testing.T) {
	eachBackend(t, func(t *testing.T, _ redis.UniversalClient, st *Store) {
		create(t, st, "w")
		require.Equal(t, [3]string{}, waiting(t, st, "w"), "pending with nothing holding it")
		failed := Attempt{Attempt: 1, Agent: "llm", ErrorClass: "provider_error", Error: "status 500: provider_error"}
		apply(t, st, Delivery{ID: "w", Attempt: 1, Seed: seed()}, Retrying(failed, 2*time.Second, t0.Add(2*time.Second)))
		require.Equal(t, [3]string{WaitingRetry, "the backoff after attempt 1 failed (provider_error)", at(2 * time.Second)}, waiting(t, st, "w"))

		why := `budget "tenant acme" tokens 100/1h0m0s`
		apply(t, st, Delivery{ID: "w", Attempt: 2, Seed: seed()}, Deferred(Attempt{Agent: "llm"}, WaitingBudget, why, 30*time.Minute))
		v := get(t, st, "w")
		require.Equal(t, StateDeferred, v.State)
		require.Equal(t, [3]string{WaitingBudget, why, at(30 * time.Minute)}, [3]string{v.WaitingFor, v.WaitingDetail, v.NextAttemptAt})
		require.Equal(t, "status 500: provider_error", v.Error, "the JSON keeps the last attempt's error")
		require.Equal(t, WaitingBudget, v.History[len(v.History)-1].Reason, "the deferral's event names its kind")

		apply(t, st, Delivery{ID: "w", Attempt: 2, Seed: seed()}, Started())
		require.Equal(t, [3]string{}, waiting(t, st, "w"), "a running task waits for nothing")

		suspend(t, st, "s", "approval")
		require.Equal(t, [3]string{WaitingSignal, `signal "approval"`, "2030-01-01T00:00:00Z"}, waiting(t, st, "s"))

		ok, err := st.Create(context.Background(), New{ID: "later", Seed: seed(), State: StateScheduled, Delay: time.Hour})
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, [3]string{WaitingSchedule, "its first run is scheduled", at(time.Hour)}, waiting(t, st, "later"))
	})
}

// TestWaitingHeldByQueue: a pending task whose tenant is at its cap waits
// for tenant_cap; a paused queue holds every waiting task, naming what
// would hold it after; a deferral recorded without a kind is read from its
// text.
func TestWaitingHeldByQueue(t *testing.T) {
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, st *Store) {
		ctx := context.Background()
		s := seed()
		s.Tenant = "acme"
		ok, err := st.Create(ctx, New{ID: "p", Seed: s, State: StatePending})
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, [3]string{}, waiting(t, st, "p"))
		require.NoError(t, rdb.ZAdd(ctx, rkeys.FairCapped("default"), redis.Z{Member: "acme", Score: 1}).Err())
		require.Equal(t, [3]string{WaitingTenantCap, `tenant "acme" is at its cap of runs in flight`, ""}, waiting(t, st, "p"))

		create(t, st, "b")
		apply(t, st, Delivery{ID: "b", Attempt: 1, Seed: seed()}, Deferred(Attempt{}, "", `breaker "llm.example" is open`, time.Second))
		require.Equal(t, [3]string{WaitingBreaker, `breaker "llm.example" is open`, at(time.Second)}, waiting(t, st, "b"))

		require.NoError(t, rdb.Set(ctx, broker.PausedKey("default"), 1, 0).Err())
		require.Equal(t, [3]string{WaitingQueuePaused, `queue "default" is paused; then breaker: breaker "llm.example" is open`, at(time.Second)},
			waiting(t, st, "b"))
		require.Equal(t, [3]string{WaitingQueuePaused, `queue "default" is paused; then tenant_cap: tenant "acme" is at its cap of runs in flight`, ""},
			waiting(t, st, "p"))
	})
}
