package notify

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
)

// TestBurstOfArrivalsDoesNotExhaustThePool: 2,000 waiters (half Wait,
// half Follow) arrive at once on a client with a pool of 2 connections
// and a 20 ms pool wait; each arrival's reads (Watch, the first state or
// events read) ride shared pipelines, so none fails with "connection pool
// timeout" and every one is in place.
func TestBurstOfArrivalsDoesNotExhaustThePool(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 2, PoolTimeout: 20 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	b := setup(t, rdb, never)
	const n = 2000
	for i := range n {
		b.create(t, fmt.Sprintf("a-%d", i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("a-%d", i)
			var err error
			if i%2 == 0 {
				_, err = b.hub.Wait(ctx, id)
			} else {
				err = b.hub.Follow(ctx, id, 0, func(ev record.Event) error { return nil }, FollowOptions{})
			}
			if err != nil && ctx.Err() == nil {
				errs <- fmt.Errorf("%s: %w", id, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	failed := 0
	var first error
	for err := range errs {
		if failed == 0 {
			first = err
		}
		failed++
	}
	require.Zero(t, failed, "arrivals failed, the first: %v", first)
}
