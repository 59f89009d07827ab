package api_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/api"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/usage"
)

// TestTaskUsage: GET /api/v1/tasks/{id} carries the task's summed usage
// and each attempt event's own.
func TestTaskUsage(t *testing.T) {
	t.Parallel()
	e := setup(t, api.Options{})
	ctx := context.Background()
	st := record.NewStore(e.rdb)
	seed := record.Seed{Agent: "llm", Action: "chat", Queue: "default", EnqueuedAt: time.Now()}
	ok, err := st.Create(ctx, record.New{ID: "u1", Seed: seed, State: record.StatePending})
	require.NoError(t, err)
	require.True(t, ok)
	_, err = st.Apply(ctx, record.Delivery{ID: "u1", Attempt: 1, Seed: seed}, record.Succeeded(record.Attempt{Attempt: 1, Agent: "llm",
		Usage: usage.Usage{Model: "gpt-4o", InputTokens: 2006, CachedTokens: 1920, OutputTokens: 300, TotalTokens: 2306, CostUSD: 0.005615, Priced: true}}, nil))
	require.NoError(t, err)

	r := do(t, "GET", e.url+"/api/v1/tasks/u1", "", "")
	require.Equal(t, 200, r.status, r.body)
	var v struct {
		Usage   usage.Usage `json:"usage"`
		History []struct {
			Event string       `json:"event"`
			Usage *usage.Usage `json:"usage"`
		} `json:"history"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.body), &v))
	require.Equal(t, usage.Usage{InputTokens: 2006, CachedTokens: 1920, OutputTokens: 300, TotalTokens: 2306, CostUSD: 0.005615, Priced: true}, v.Usage)
	last := v.History[len(v.History)-1]
	require.Equal(t, "succeeded", last.Event)
	require.NotNil(t, last.Usage)
	require.Equal(t, "gpt-4o", last.Usage.Model)
}
