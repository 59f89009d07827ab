package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/broker/brokertest"
	"github.com/agentq/agentq/internal/inspect"
)

// TestInspectorTenants: `inspector tenants` shows each tenant of each
// queue with its runs waiting in its lanes and in flight (acme at its cap
// of 2, from the config), as JSON Lines and as a table; --queue keeps one
// queue; `stats` counts the lanes' runs as pending.
func TestInspectorTenants(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rdb := b.rdb.(redis.UniversalClient)
	want := brokertest.Seed(t, rdb, "default")
	brokertest.Enqueue(t, rdb, "other", broker.Lane{Tenant: "zed"}, "zed", 1, time.Now())
	cfg := filepath.Join(t.TempDir(), "agentq.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(brokertest.YAML), 0o600))

	out, errOut, code := runCmd(t, NewInspectorCmd, "", "--redis", b.url, "--config", cfg, "tenants", "--json")
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 5)
	var got []inspect.Tenant
	for _, l := range lines {
		var tn inspect.Tenant
		require.NoError(t, json.Unmarshal([]byte(l), &tn))
		got = append(got, tn)
	}
	require.Equal(t, "", got[0].Tenant, "the default tenant's name is \"\" in JSON")
	for _, tn := range got[:3] {
		require.Equal(t, "default", tn.Queue)
		require.Equal(t, want[tn.Tenant].Pending, tn.Pending, tn.Tenant)
		require.Equal(t, want[tn.Tenant].InFlight, tn.InFlight, tn.Tenant)
	}
	require.Equal(t, "acme", got[1].Tenant)
	require.Equal(t, 2, got[1].Concurrency)
	require.Equal(t, 3.0, got[1].Weight)
	require.True(t, got[1].Capped)
	require.Contains(t, lines[1], `"oldest_waiting":"`)
	_, err := time.Parse(time.RFC3339, got[1].OldestWaiting.Format(time.RFC3339))
	require.NoError(t, err)
	require.Equal(t, "zed", got[4].Tenant)
	require.Equal(t, "other", got[4].Queue)

	out, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", b.url, "--config", cfg, "tenants")
	require.Equal(t, 0, code, errOut)
	rows := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, rows, 6)
	require.Regexp(t, `^QUEUE\s+TENANT\s+PENDING\s+IN FLIGHT\s+CAP\s+WEIGHT\s+CAPPED\s+OLDEST WAITING$`, rows[0])
	require.Regexp(t, `^default\s+\(default\)\s+`+itoa(want[""].Pending)+`\s+`+itoa(want[""].InFlight)+`\s+none\s+1\s+no\s+`, rows[1])
	require.Regexp(t, `^default\s+acme\s+`+itoa(want["acme"].Pending)+`\s+2\s+2\s+3\s+yes\s+(59m5\ds|1h0m\d+s)$`, rows[2])
	require.Regexp(t, `^other\s+zed\s+1\s+0\s+none\s+1\s+no\s+\d+s$`, rows[5])

	out, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", b.url, "--config", cfg, "tenants", "--queue", "other", "--json")
	require.Equal(t, 0, code, errOut)
	require.Len(t, strings.Split(strings.TrimSpace(out), "\n"), 2)
	require.NotContains(t, out, "acme")

	out, _, code = runCmd(t, NewInspectorCmd, "", "--redis", b.url, "stats", "--json")
	require.Equal(t, 0, code)
	var st Stats
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	inLanes := want["acme"].Pending + want["beta"].Pending
	require.Equal(t, int(inLanes+want[""].Pending), st.Queues[0].Pending, "pending counts the runs in lanes")
	require.Equal(t, inLanes, st.Queues[0].PendingInLanes)
	require.Equal(t, 3, st.Queues[0].Tenants)
	out, _, code = runCmd(t, NewInspectorCmd, "", "--redis", b.url, "stats")
	require.Equal(t, 0, code)
	require.Regexp(t, regexp.MustCompile(`(?m)^default\s+`+itoa(inLanes+want[""].Pending)+`\s+`+itoa(inLanes)+`\s+3\s+`), out)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
