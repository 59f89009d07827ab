package record

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/internal/usage"
)

// TestUsageSummed: the changes that end an attempt (a failed call, a
// retry, a restart, the success) carry its usage on their event and add it
// to the task's sum, over retries and restarts; a write sent again adds
// nothing; changes without usage write no usage field at all.
func TestUsageSummed(t *testing.T) {
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, st *Store) {
		ctx := context.Background()
		create(t, st, "u1")
		priced := func(in, out, cached int64, cost float64) usage.Usage {
			return usage.Usage{Model: "gpt-4o", InputTokens: in, OutputTokens: out, CachedTokens: cached,
				TotalTokens: in + out, CostUSD: cost, Priced: cost != 0}
		}
		d := Delivery{ID: "u1", Attempt: 1, Seed: seed()}
		require.Equal(t, Applied, apply(t, st, d, Started()))
		require.Nil(t, get(t, st, "u1").Usage, "no usage before an attempt reports some")

		failed := CallFailed(Attempt{Attempt: 1, Agent: "llm", ErrorClass: "provider_error", Usage: priced(100, 10, 0, 0.000350)})
		require.Equal(t, Applied, apply(t, st, d, failed))
		require.Equal(t, Applied, apply(t, st, d, failed), "the same write again: counted once")
		require.Equal(t, Applied, apply(t, st, d, Retrying(Attempt{Attempt: 1, Agent: "llm", ErrorClass: "timeout",
			Usage: priced(1000, 0, 800, 0.0009)}, time.Second, t0)))
		d.Attempt = 2
		require.Equal(t, Applied, apply(t, st, d, Restarting(Attempt{Attempt: 2, Agent: "llm", ErrorClass: "provider_error"},
			NextRun{Run: 1, Restarts: 1}, time.Second)))
		d = Delivery{ID: "u1", Run: 1, Restarts: 1, Attempt: 1, Seed: seed()}
		require.Equal(t, Applied, apply(t, st, d, Succeeded(Attempt{Attempt: 1, Restart: 1, Agent: "llm",
			Usage: usage.Usage{Model: "mystery", InputTokens: 7, OutputTokens: 3, TotalTokens: 12}}, nil)))

		v := get(t, st, "u1")
		require.NotNil(t, v.Usage)
		require.Equal(t, int64(1107), v.Usage.InputTokens)
		require.Equal(t, int64(13), v.Usage.OutputTokens)
		require.Equal(t, int64(800), v.Usage.CachedTokens)
		require.Equal(t, int64(1122), v.Usage.TotalTokens)
		require.InDelta(t, 0.00125, v.Usage.CostUSD, 1e-12)
		require.True(t, v.Usage.Priced)

		var withUsage []string
		var used []*usage.Usage
		for _, ev := range v.History {
			if ev.Usage != nil {
				withUsage = append(withUsage, ev.Event)
				used = append(used, ev.Usage)
			}
		}
		require.Equal(t, []string{EventFailed, EventRetrying, EventSucceeded}, withUsage, "the restart's attempt reported none")
		require.Equal(t, int64(800), used[1].CachedTokens)
		require.Equal(t, "gpt-4o", used[0].Model)

		// A task whose attempts report no usage has no usage field.
		create(t, st, "u2")
		d2 := Delivery{ID: "u2", Attempt: 1, Seed: seed()}
		require.Equal(t, Applied, apply(t, st, d2, Succeeded(Attempt{Attempt: 1, Agent: "llm"}, nil)))
		require.Nil(t, get(t, st, "u2").Usage)
		keys, err := rdb.HKeys(ctx, rkeys.Task("u2")).Result()
		require.NoError(t, err)
		require.NotContains(t, keys, FieldUsage)
	})
}

// TestUsageRidesTheAck: a success that rides asynq's ack sums its usage
// too.
func TestUsageRidesTheAck(t *testing.T) {
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, st *Store) {
		ctx := context.Background()
		create(t, st, "ua")
		d := Delivery{ID: "ua", Attempt: 1, Seed: seed()}
		c := Succeeded(Attempt{Attempt: 1, Agent: "llm", Usage: usage.Usage{InputTokens: 5, OutputTokens: 2, TotalTokens: 7}}, nil)
		out, err := st.ApplyAcked(ctx, d, c, activeDelivery(t, rdb, "ua"))
		require.NoError(t, err)
		require.Equal(t, Applied, out)
		u := get(t, st, "ua").Usage
		require.NotNil(t, u)
		require.Equal(t, usage.Usage{InputTokens: 5, OutputTokens: 2, TotalTokens: 7}, *u)
	})
}

// TestUsageSumField: the sum's one field, as written and read, and a sum
// that a priced attempt joins after an unpriced one (and the other way
// round) is priced, its cost exact to the nano-dollar.
func TestUsageSumField(t *testing.T) {
	require.Equal(t, "", FormatUsageSum(usage.Usage{Model: "m"}))
	require.Nil(t, ParseUsageSum(""))
	require.Nil(t, ParseUsageSum("0,0,0,0"))
	u := usage.Usage{InputTokens: 1200, OutputTokens: 80, CachedTokens: 1024, TotalTokens: 1280}
	require.Equal(t, "1200,80,1024,1280", FormatUsageSum(u))
	require.Equal(t, &u, ParseUsageSum("1200,80,1024,1280"))
	u.CostUSD, u.Priced = 0.00124, true
	require.Equal(t, "1200,80,1024,1280,1240000", FormatUsageSum(u))
	require.Equal(t, &u, ParseUsageSum("1200,80,1024,1280,1240000"))
	require.Equal(t, &usage.Usage{CostUSD: 1e-9, Priced: true}, ParseUsageSum(FormatUsageSum(usage.Usage{CostUSD: 1e-9})))

	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, st *Store) {
		for _, order := range [][2]float64{{0, 0.25}, {0.25, 0}} {
			id := fmt.Sprint("us", order[0])
			create(t, st, id)
			d := Delivery{ID: id, Attempt: 1, Seed: seed()}
			for i, cost := range order {
				a := Attempt{Attempt: 1, Agent: "llm", ErrorClass: "provider_error",
					Usage: usage.Usage{InputTokens: 1e9, OutputTokens: 1, TotalTokens: 1e9 + 1, CostUSD: cost, Priced: cost != 0}}
				c := CallFailed(a)
				if i == 1 {
					a.ErrorClass = ""
					c = Succeeded(a, nil)
				}
				require.Equal(t, Applied, apply(t, st, d, c))
			}
			require.Equal(t, &usage.Usage{InputTokens: 2e9, OutputTokens: 2, TotalTokens: 2e9 + 2, CostUSD: 0.25, Priced: true},
				get(t, st, id).Usage)
			raw, err := rdb.HGet(context.Background(), rkeys.Task(id), FieldUsage).Result()
			require.NoError(t, err)
			require.Equal(t, "2000000000,2,0,2000000002,250000000", raw)
		}
	})
}

// TestUsageSumSaturates: attempts reporting counts and costs beyond what
// an int64 holds (as a Usage not clamped by usage.Parse may) sum to
// usage.MaxSum of each unit, never to a negative or a wrapped number: a
// cost beyond int64 nano-dollars was a task's cost_usd -9223372036.85,
// which no max_cost_usd is ever reached by.
func TestUsageSumSaturates(t *testing.T) {
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, st *Store) {
		create(t, st, "big")
		huge := usage.Usage{Model: "m", InputTokens: 9_000_000_000_000_000_000, OutputTokens: -3,
			TotalTokens: 9_000_000_000_000_000_000, CostUSD: 2.25e13, Priced: true}
		d := Delivery{ID: "big", Attempt: 1, Seed: seed()}
		require.Equal(t, Applied, apply(t, st, d, Started()))
		require.Equal(t, Applied, apply(t, st, d, CallFailed(Attempt{Attempt: 1, Agent: "llm", ErrorClass: "provider_error", Usage: huge})))
		v := get(t, st, "big")
		require.NotNil(t, v.Usage)
		require.Equal(t, usage.MaxSum, v.Usage.InputTokens)
		require.Zero(t, v.Usage.OutputTokens)
		require.InDelta(t, float64(usage.MaxSum)/1e9, v.Usage.CostUSD, 1e-6)
		require.Equal(t, Applied, apply(t, st, d, Retrying(Attempt{Attempt: 1, Agent: "llm", ErrorClass: "timeout",
			Usage: usage.Usage{InputTokens: 5, OutputTokens: 7, TotalTokens: 12, CostUSD: 0.5, Priced: true}}, time.Second, t0)))
		v = get(t, st, "big")
		require.Equal(t, usage.MaxSum, v.Usage.InputTokens, "saturated, not wrapped")
		require.Equal(t, int64(7), v.Usage.OutputTokens)
		require.Equal(t, usage.MaxSum, v.Usage.TotalTokens)
		require.InDelta(t, float64(usage.MaxSum)/1e9, v.Usage.CostUSD, 1e-6)
		stored, err := rdb.HGet(context.Background(), rkeys.Task("big"), FieldUsage).Result()
		require.NoError(t, err)
		require.Equal(t, "9007199254740992,7,0,9007199254740992,9007199254740992", stored, "stored saturated")
	})
	for _, s := range []string{"9300000000000000000,1,0,-5,99999999999999999999", "1,2,3,4"} {
		u := ParseUsageSum(s)
		require.NotNil(t, u)
		require.GreaterOrEqual(t, u.InputTokens, int64(0))
		require.LessOrEqual(t, u.InputTokens, usage.MaxSum, "a number ≥ 2^63 is the most, not 0")
		require.GreaterOrEqual(t, u.TotalTokens, int64(0))
	}
	require.Equal(t, usage.MaxSum, ParseUsageSum("9300000000000000000,0,0,0").InputTokens)
}
