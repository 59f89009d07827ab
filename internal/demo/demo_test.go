package demo

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMain lets the test binary act as the demo's exec agent, as the demo
// binary does (`demo agent`).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == AgentMode {
		os.Exit(RunAgent(os.Stdin, os.Stdout))
	}
	os.Exit(m.Run())
}

// TestDemoRuns: the demo completes on the embedded Redis with the promised
// mix — successes, retries, a restart, and exactly three dead letters.
func TestDemoRuns(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, Run(ctx, &out))
	s := out.String()
	require.Contains(t, s, "NOTHING IS DURABLE")
	require.Contains(t, s, "dead_lettered=3  succeeded=9")
	require.Contains(t, s, "restarting")
	require.Contains(t, s, "3 of 3 dead letters")
	require.Contains(t, s, "context_length")
	require.Contains(t, s, "logic_error")
	require.Contains(t, s, "not_supported")
}
