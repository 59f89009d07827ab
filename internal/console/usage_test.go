package console

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/usage"
)

// seedUsage records usage of two agents and tenants in this hour and the
// one before (as workers' recorders would).
func (f *fixture) seedUsage(t *testing.T) {
	t.Helper()
	rec := usage.NewRecorder(f.rdb, usage.RecorderOptions{})
	now := time.Now()
	rec.Add(usage.Entry{Agent: "llm", Tenant: "acme", At: now, Usage: usage.Usage{Model: "gpt-x", InputTokens: 1200, OutputTokens: 300, CachedTokens: 100, CostUSD: 0.0125, Priced: true}})
	rec.Add(usage.Entry{Agent: "llm", Tenant: "beta", At: now.Add(-3 * time.Hour), Usage: usage.Usage{Model: "gpt-x", InputTokens: 800, OutputTokens: 200, CostUSD: 0.0075, Priced: true}})
	rec.Add(usage.Entry{Agent: "tool", Tenant: "acme", At: now, Usage: usage.Usage{InputTokens: 40, OutputTokens: 2}})
	require.NoError(t, rec.Flush(context.Background()))
}

// TestUsagePage: the Usage page shows the totals over the window grouped
// by agent (or tenant), with the charts' bars per hour; a bad grouping is
// a 400; the navigation links to it.
func TestUsagePage(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	f.seedUsage(t)
	r := call(t, "GET", f.url+"/ui/usage", nil, "Authorization: Bearer "+testToken)
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Contains(t, r.body, `<a href="/ui/usage" aria-current="page">Usage</a>`)
	require.Contains(t, r.body, `<strong>2542</strong> tokens`)
	require.Contains(t, r.body, `<strong>$0.020000</strong>`)
	require.Regexp(t, `(?s)<tr data-key="llm">.*<td class="n total" data-label="Total tokens">2500</td><td class="n cost" data-label="Cost \(USD\)">0.020000</td>`, r.body)
	require.Contains(t, r.body, `<tr data-key="tool">`)
	require.Contains(t, r.body, `<rect class="s-in"`)
	require.Contains(t, r.body, `<rect class="s-out"`)
	require.Contains(t, r.body, `<rect class="s-cost"`)
	require.Contains(t, r.body, `cost $0.02`)

	r = call(t, "GET", f.url+"/ui/usage?by=tenant&since=30m", nil, "Authorization: Bearer "+testToken)
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Contains(t, r.body, `<tr data-key="acme">`)
	require.NotContains(t, r.body, `<tr data-key="beta">`, "three hours ago is outside 30m")

	r = call(t, "GET", f.url+"/ui/usage?by=queue", nil, "Authorization: Bearer "+testToken)
	require.Equal(t, http.StatusBadRequest, r.status)
}

func TestDollars(t *testing.T) {
	t.Parallel()
	for micro, want := range map[int64]string{0: "$0.00", 20000: "$0.02", 1234567: "$1.234567", 1500000: "$1.50", 10: "$0.00001"} {
		require.Equal(t, want, dollars(micro))
	}
}

// TestUsageChartsEndNowWithDates: the Usage charts' x axis ends at now
// (not at the end of now's hour), its labels carry the date, and no bar
// reaches past either edge of the plot (the hour now is in is cut at now).
func TestUsageChartsEndNowWithDates(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 5, 14, 20, 0, 0, time.UTC)
	rep := usage.Report{Hours: []usage.HourTotal{
		{At: time.Date(2026, 3, 4, 14, 0, 0, 0, time.UTC), Counts: usage.Counts{InputTokens: 10, OutputTokens: 5, CostMicroUSD: 7}},
		{At: time.Date(2026, 3, 5, 13, 0, 0, 0, time.UTC), Counts: usage.Counts{InputTokens: 100, OutputTokens: 50, CostMicroUSD: 70}},
		{At: time.Date(2026, 3, 5, 14, 0, 0, 0, time.UTC), Counts: usage.Counts{InputTokens: 40, OutputTokens: 20, CostMicroUSD: 30}},
	}}
	for since, want := range map[time.Duration][]string{
		24 * time.Hour:      {"Mar 4 14:20", "Mar 4 20:20", "Mar 5 02:20", "Mar 5 08:20", "Mar 5 14:20"},
		7 * 24 * time.Hour:  {"Feb 26", "Feb 28", "Mar 2", "Mar 3", "Mar 5"},
		90 * 24 * time.Hour: {"Dec 5", "Dec 28", "Jan 19", "Feb 11", "Mar 5"},
	} {
		tok, cost := usageCharts(rep, now, since)
		for _, c := range []chart{tok, cost} {
			var labels []string
			for _, x := range c.XTicks {
				labels = append(labels, x.Text)
			}
			require.Equal(t, want, labels, "%s: %s: dated labels, the last one now", since, c.Title)
			require.NotEmpty(t, c.Bars)
			for _, b := range c.Bars {
				x, err := strconv.ParseFloat(b.X, 64)
				require.NoError(t, err)
				w, err := strconv.ParseFloat(b.W, 64)
				require.NoError(t, err)
				require.GreaterOrEqual(t, x, float64(c.Left), "%s: %s starts left of the plot", since, b.Title)
				require.LessOrEqual(t, x+w, float64(c.Right)+0.05, "%s: %s runs past now", since, b.Title)
			}
		}
	}
}
