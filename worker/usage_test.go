package worker

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/internal/usage"
)

// TestWorkerRecordsUsageTotals: a worker built with no sink option records
// its attempts' usage in the fleet's totals (a usage.Recorder started and
// stopped with it: its Stop flushes what is left), with the config's
// retention and bound.
func TestWorkerRecordsUsageTotals(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	w := newTestWorker(t, srv, "", "usage: {retention: 48h, max_series: 50}\n")
	rec, ok := w.usage.(*usage.Recorder)
	require.True(t, ok, "a worker records totals by default")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	require.Eventually(t, rec.Started, 30*time.Second, 5*time.Millisecond, "started with the worker")
	at := time.Now()
	rec.Add(usage.Entry{Agent: "llm", Tenant: "acme", At: at,
		Usage: usage.Usage{Model: "m", InputTokens: 120, OutputTokens: 30, CostUSD: 0.0042, Priced: true}})
	cancel()
	require.NoError(t, <-done)
	r, err := usage.Summarize(context.Background(), rdb, "tenant", time.Hour, at)
	require.NoError(t, err)
	require.Len(t, r.Groups, 1)
	require.Equal(t, "acme", r.Groups[0].Key)
	require.Equal(t, int64(150), r.Groups[0].TotalTokens)
	require.Equal(t, int64(4200), r.Groups[0].CostMicroUSD)
	ttl, err := rdb.TTL(context.Background(), rkeys.UsageHour(at.Unix()/3600)).Result()
	require.NoError(t, err)
	require.Greater(t, ttl, 47*time.Hour)
	require.LessOrEqual(t, ttl, 49*time.Hour, "usage.retention")
}

type sinkFunc func(usage.Entry)

func (f sinkFunc) Add(e usage.Entry) { f(e) }

// TestWorkerUsageSinkOption: a sink given as an option replaces the recorder.
func TestWorkerUsageSinkOption(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	var mu sync.Mutex
	var got []usage.Entry
	s := sinkFunc(func(e usage.Entry) { mu.Lock(); got = append(got, e); mu.Unlock() })
	w := newTestWorker(t, srv, "", "", withUsageSink(s))
	w.usage.Add(usage.Entry{Agent: "a"})
	require.Len(t, got, 1)
	_, isRec := w.usage.(*usage.Recorder)
	require.False(t, isRec)
}

// TestUsageDefaultsAgree: config's seed values are usage's defaults.
func TestUsageDefaultsAgree(t *testing.T) {
	t.Parallel()
	require.Equal(t, usage.DefaultRetention, config.DefaultUsageRetention)
	require.Equal(t, usage.DefaultMaxSeries, config.DefaultUsageMaxSeries)
	d := config.Default()
	require.Equal(t, usage.DefaultRetention, d.Usage.Retention)
}
