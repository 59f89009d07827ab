package console

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentq/agentq/internal/usage"
)

// usageWindows are the windows the Usage page offers.
var usageWindows = []time.Duration{time.Hour, 6 * time.Hour, 24 * time.Hour, 7 * 24 * time.Hour, 30 * 24 * time.Hour, 90 * 24 * time.Hour}

// usagePage is the Usage page: the fleet's usage totals (package usage,
// what `inspector usage` and GET /api/v1/usage show) over a window, as
// charts of tokens and cost per hour and a table grouped by agent, tenant
// or model.
func (c *Console) usagePage(rw http.ResponseWriter, r *http.Request, s session) error {
	by := r.URL.Query().Get("by")
	if by == "" {
		by = "agent"
	}
	if err := usage.ValidBy(by); err != nil {
		return httpError(http.StatusBadRequest, "Group by agent, tenant or model, not %q.", by)
	}
	since := 24 * time.Hour
	if v := r.URL.Query().Get("since"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return httpError(http.StatusBadRequest, "The window must be a positive duration such as 24h, not %q.", v)
		}
		since = d
	}
	ctx, cancel := c.bounded(r, 1)
	defer cancel()
	now := c.opts.Now()
	rep, err := usage.Summarize(ctx, c.Redis, by, since, now)
	if err != nil {
		return err
	}
	tokens, cost := usageCharts(rep, now, since)
	c.render(rw, r, s, http.StatusOK, "usage.html", "usage", "Usage", map[string]any{
		"Report": rep, "By": by, "Since": since, "Windows": usageWindows, "Tokens": tokens, "Cost": cost,
		"Every": usage.DefaultFlushEvery.String(), "Groupings": []string{"agent", "tenant", "model"},
	})
	return nil
}

// usageCharts are the Usage page's charts over the window that ends now
// (hours are counted whole, so the hour the window starts in and the hour
// now is in are drawn cut at the window's edges): tokens per hour (input
// below, output above) and cost per hour. The x axis is labelled with
// dates (UTC).
func usageCharts(rep usage.Report, now time.Time, since time.Duration) (chart, chart) {
	end := now.UTC()
	start := end.Add(-since)
	maxT, maxC := 0, 0
	for _, h := range rep.Hours {
		maxT = max(maxT, int(h.InputTokens+h.OutputTokens))
		maxC = max(maxC, int(h.CostMicroUSD))
	}
	t := newChart("Tokens per hour (input, output)", maxT, start, since)
	k := newChart("Cost per hour (USD)", maxC, start, since)
	layout := "Jan 2 15:04"
	if since > 48*time.Hour {
		layout = "Jan 2"
	}
	for _, ch := range []*chart{&t, &k} {
		for i := range ch.XTicks {
			ch.XTicks[i].Text = start.Add(since * time.Duration(i) / 4).Format(layout)
		}
	}
	for i := range k.YTicks {
		v := k.Max * i / 2
		k.YTicks[i].Text = dollars(int64(v))
	}
	t.Empty, k.Empty = len(rep.Hours) == 0, len(rep.Hours) == 0
	var inSum, outSum, costSum int64
	for _, h := range rep.Hours {
		inSum += h.InputTokens
		outSum += h.OutputTokens
		costSum += h.CostMicroUSD
		x, w, ok := hourBar(t, h.At, start, since)
		if !ok {
			continue
		}
		label := h.At.UTC().Format("Jan 2 15:04") + ": " + strconv.FormatInt(h.InputTokens, 10) + " input, " +
			strconv.FormatInt(h.OutputTokens, 10) + " output tokens, " + dollars(h.CostMicroUSD)
		yIn, yAll := t.y(int(h.InputTokens)), t.y(int(h.InputTokens+h.OutputTokens))
		if h.InputTokens > 0 {
			t.Bars = append(t.Bars, bar{Class: "s-in", X: x, W: w, Y: strconv.Itoa(yIn), H: strconv.Itoa(t.Base - yIn), Title: label})
		}
		if h.OutputTokens > 0 {
			t.Bars = append(t.Bars, bar{Class: "s-out", X: x, W: w, Y: strconv.Itoa(yAll), H: strconv.Itoa(yIn - yAll), Title: label})
		}
		if yC := k.y(int(h.CostMicroUSD)); h.CostMicroUSD > 0 {
			k.Bars = append(k.Bars, bar{Class: "s-cost", X: x, W: w, Y: strconv.Itoa(yC), H: strconv.Itoa(k.Base - yC), Title: label})
		}
	}
	t.Legend = []legend{{Class: "s-in", Name: "input", Last: int(inSum)}, {Class: "s-out", Name: "output", Last: int(outSum)}}
	k.Legend = []legend{{Class: "s-cost", Name: "cost", Text: dollars(costSum)}}
	return t, k
}

// hourBar is the x and width of the bar of the hour from at on chart c
// over the window from start: 80% of the hour's width, centred, cut at
// the plot's edges; false when none of it is inside.
func hourBar(c chart, at, start time.Time, window time.Duration) (x, w string, ok bool) {
	bw := max(1.0, float64(c.Right-c.Left)*float64(time.Hour)/float64(window)*0.8)
	x0 := c.x(at, start, window) + bw/8
	x1 := min(x0+bw, float64(c.Right))
	x0 = max(x0, float64(c.Left))
	if x1 <= x0 {
		return "", "", false
	}
	return ff(x0), ff(x1 - x0), true
}

// dollars writes micro-dollars as "$1.234567", trailing zeros trimmed
// down to the cent.
func dollars(micro int64) string {
	s := strconv.FormatFloat(float64(micro)/1e6, 'f', 6, 64)
	for strings.HasSuffix(s, "0") && len(s)-strings.IndexByte(s, '.') > 3 {
		s = s[:len(s)-1]
	}
	return "$" + s
}
