package tenants

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
)

// TestPublishThenRepairPerQueue: the service publishes the named tenants'
// settings to each queue, then, one interval later and at every interval,
// claims each queue's repair for its holder (one worker per queue and
// interval) and runs it; Stop ends it.
func TestPublishThenRepairPerQueue(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	fc := broker.FairConfig{Named: map[string]broker.TenantSettings{"acme": {Weight: 3}}}
	queues := []string{"high", "low"}
	s := New(rdb, fc, queues, Options{Holder: "w1", Interval: 50 * time.Millisecond})
	s.Start(ctx)
	t.Cleanup(s.Stop)
	for _, q := range queues {
		require.Eventually(t, func() bool { return rdb.HExists(ctx, rkeys.FairConf(q), "acme").Val() },
			10*time.Second, 5*time.Millisecond, "published to %s", q)
		require.Eventually(t, func() bool { return strings.HasPrefix(rdb.Get(ctx, rkeys.FairRepairClaim(q)).Val(), "w1#") },
			10*time.Second, 5*time.Millisecond, "the repair of %s claimed by its holder", q)
	}
	s.Stop()
	s.Stop()
}
