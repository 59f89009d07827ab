package worker

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/buildinfo"
)

// TestBuildInfoExported (#39 item 3): the worker's registry exports
// agentq_build_info{version,revision} 1.
func TestBuildInfoExported(t *testing.T) {
	t.Parallel()
	m := newMetrics([]string{"tool"}, broker.FairConfig{})
	mfs, err := m.reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != buildinfo.MetricName {
			continue
		}
		require.Len(t, mf.GetMetric(), 1)
		labels := map[string]string{}
		for _, l := range mf.GetMetric()[0].GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		require.Equal(t, map[string]string{"version": buildinfo.Version(), "revision": buildinfo.Revision()}, labels)
		require.Equal(t, 1.0, mf.GetMetric()[0].GetGauge().GetValue())
		return
	}
	t.Fatalf("%s is not exported", buildinfo.MetricName)
}
