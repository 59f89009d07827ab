package tracing

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNewExporter: http/protobuf (the default) and grpc are built without
// connecting; another protocol is an error naming the variable.
func TestNewExporter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, proto := range []string{"", "http/protobuf", "grpc", "GRPC"} {
		exp, err := newExporter(ctx, func(k string) string {
			if k == EnvProtocol {
				return proto
			}
			return ""
		})
		require.NoError(t, err, proto)
		require.NoError(t, exp.Shutdown(ctx))
	}
	exp, err := newExporter(ctx, func(k string) string {
		if k == EnvTracesProtocol {
			return "grpc"
		}
		if k == EnvProtocol {
			return "http/json"
		}
		return ""
	})
	require.NoError(t, err, "the traces protocol wins")
	require.NoError(t, exp.Shutdown(ctx))
	_, err = newExporter(ctx, func(k string) string {
		if k == EnvProtocol {
			return "http/json"
		}
		return ""
	})
	require.ErrorContains(t, err, EnvProtocol)
	require.ErrorContains(t, err, "http/json")
	_, err = newExporter(ctx, func(k string) string {
		if k == EnvTracesProtocol {
			return "http/json"
		}
		return ""
	})
	require.ErrorContains(t, err, EnvTracesProtocol)
}

// TestNewResource: the command's service name unless the environment
// names one.
func TestNewResource(t *testing.T) {
	t.Parallel()
	name := func(getenv func(string) string) string {
		r := newResource(setupOptions{service: "agentq-worker", getenv: getenv})
		for _, kv := range r.Attributes() {
			if kv.Key == "service.name" {
				return kv.Value.AsString()
			}
		}
		return ""
	}
	require.Equal(t, "agentq-worker", name(func(string) string { return "" }))
	require.NotEqual(t, "agentq-worker", name(func(k string) string {
		if k == EnvServiceName {
			return "mine"
		}
		return ""
	}), "OTEL_SERVICE_NAME wins (the SDK's default resource reads it)")
}
