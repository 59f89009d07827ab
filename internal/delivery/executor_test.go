package delivery

import (
	"io"
	"log/slog"
	"maps"
	"slices"
	"testing"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/configx"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redisx"
	"github.com/agentq/agentq/internal/restart"
	"github.com/agentq/agentq/internal/usage"
	"github.com/agentq/agentq/resilience"
	"github.com/agentq/agentq/tasks"
)

// discardUsage is a usage sink that keeps nothing.
type discardUsage struct{}

func (discardUsage) Add(usage.Entry) {}

// testExecutor is an Executor for cfg's agents and the Go agents of funcs
// on rdb, without the breaker gate, as worker.New wires one.
func testExecutor(t *testing.T, cfg *config.Config, rdb redis.UniversalClient, funcs map[string]agent.Runner) *Executor {
	t.Helper()
	specs, err := BuildSpecs(cfg, funcs)
	require.NoError(t, err)
	return New(Deps{
		Config: cfg, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Specs: specs, RDB: rdb,
		Batch: redisx.Direct(rdb), Records: record.NewStore(rdb), DLQ: deadletter.NewStore(rdb),
		Restarts: restart.NewScheduler(rdb, tasks.NewClient(rdb)), Breakers: breaker.New(rdb),
		Metrics:  NewMetrics(prometheus.NewRegistry(), slices.Collect(maps.Keys(specs)), configx.Fair(cfg)),
		WorkerID: "test", Inspector: asynq.NewInspectorFromRedisClient(rdb),
		Classify: resilience.Classifier{}.Classify, NoGate: true, Tracer: noop.NewTracerProvider(),
		Usage: discardUsage{},
	})
}
