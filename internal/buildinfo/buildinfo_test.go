package buildinfo

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// TestVersionIsClientsVERSION: the binaries and the clients carry one
// number, clients/VERSION's.
func TestVersionIsClientsVERSION(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("..", "..", "clients", "VERSION"))
	require.NoError(t, err)
	require.Equal(t, strings.TrimSpace(string(data)), Version())
}

func TestRevision(t *testing.T) {
	t.Parallel()
	require.Equal(t, Unknown, vcsRevision(nil, false))
	require.Equal(t, Unknown, vcsRevision(&debug.BuildInfo{}, true))
	bi := &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "0e92d56abc"}}}
	require.Equal(t, "0e92d56abc", vcsRevision(bi, true))
	require.NotEmpty(t, Revision())
	require.Equal(t, "worker "+Version()+" ("+Revision()+")", String("worker"))
}

func TestCollector(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	reg.MustRegister(Collector())
	families, err := reg.Gather()
	require.NoError(t, err)
	require.Len(t, families, 1)
	require.Equal(t, MetricName, families[0].GetName())
	m := families[0].GetMetric()
	require.Len(t, m, 1)
	labels := map[string]string{}
	for _, l := range m[0].GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	require.Equal(t, map[string]string{"version": Version(), "revision": Revision()}, labels)
	require.Equal(t, 1.0, m[0].GetGauge().GetValue())
}
