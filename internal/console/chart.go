package console

import (
	"strconv"
	"strings"
	"time"
)

// The Overview's charts: inline SVG drawn on the server from the minutes
// kept in Redis (internal/charts; no script, no image requests).

const (
	chartW, chartH       = 640, 170
	chartLeft, chartBase = 44, 150 // plot area: x from chartLeft to chartW-8, y from 8 to chartBase
	chartTop, chartRight = 8, 8
)

// chart is one SVG chart.
type chart struct {
	Title  string
	W, H   int
	Left   int
	Right  int // x of the plot's right edge
	Top    int
	Base   int // y of the plot's baseline
	Max    int
	Lines  []line
	Bars   []bar
	XTicks []tick
	YTicks []tick
	Legend []legend
	Empty  bool
}

type line struct {
	Class  string
	Points string
}

type bar struct {
	Class      string
	X, Y, W, H string
	Title      string
}

type tick struct {
	Pos    int
	Text   string
	Anchor string // text-anchor of an x label
}

type legend struct {
	Class, Name string
	Last        int
	Text        string // shown instead of Last when set
}

// overviewCharts are the Overview's two charts.
type overviewCharts struct {
	Queues, Outcomes chart
	Window, Every    time.Duration
	Keep             time.Duration
	Samples          int // minutes with data
}

func newChart(title string, maxV int, start time.Time, window time.Duration) chart {
	c := chart{Title: title, W: chartW, H: chartH, Left: chartLeft, Right: chartW - chartRight, Top: chartTop, Base: chartBase, Max: niceMax(maxV)}
	for i := 0; i <= 2; i++ {
		v := c.Max * i / 2
		c.YTicks = append(c.YTicks, tick{Pos: c.y(v), Text: strconv.Itoa(v)})
	}
	for i := 0; i <= 4; i++ {
		at := start.Add(window * time.Duration(i) / 4)
		anchor := "middle"
		switch i {
		case 0:
			anchor = "start"
		case 4:
			anchor = "end"
		}
		c.XTicks = append(c.XTicks, tick{Pos: c.Left + (c.Right-c.Left)*i/4, Text: at.UTC().Format("15:04"), Anchor: anchor})
	}
	return c
}

// niceMax rounds v up to 1, 2 or 5 times a power of ten (at least 1).
func niceMax(v int) int {
	if v <= 2 {
		return 2
	}
	p := 1
	for {
		for _, m := range []int{1, 2, 5} {
			if m*p >= v {
				return m * p
			}
		}
		p *= 10
	}
}

func (c chart) y(v int) int {
	return c.Base - (c.Base-c.Top)*v/max(c.Max, 1)
}

func (c chart) x(at, start time.Time, window time.Duration) float64 {
	f := float64(at.Sub(start)) / float64(window)
	return float64(c.Left) + f*float64(c.Right-c.Left)
}

func ff(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }

// buildCharts draws the minutes of samples over the window that ends
// with now's minute: queue sizes as lines (minutes with a reading), the
// attempts of each minute as a stacked bar.
func buildCharts(samples []Sample, now time.Time, window time.Duration) overviewCharts {
	end := now.UTC().Truncate(time.Minute).Add(time.Minute)
	start := end.Add(-window)
	out := overviewCharts{Window: window, Samples: len(samples)}
	maxQ, maxO := 0, 0
	var readings []Sample
	for _, s := range samples {
		if s.queues {
			readings = append(readings, s)
			maxQ = max(maxQ, s.Pending, s.Active, s.Scheduled, s.Retry)
		}
		maxO = max(maxO, s.Succeeded+s.Failed)
	}
	q := newChart("Queue sizes", maxQ, start, window)
	o := newChart("Attempts per minute (succeeded, failed)", maxO, start, window)
	q.Empty, o.Empty = len(readings) == 0, len(samples) == 0
	q.Lines, q.Legend = queueLines(q, readings, start, window)
	o.Bars, o.Legend = outcomeBars(o, samples, start, window)
	out.Queues, out.Outcomes = q, o
	return out
}

// queueLines are the queue sizes' lines and legend (the last readings).
func queueLines(q chart, readings []Sample, start time.Time, window time.Duration) ([]line, []legend) {
	series := []struct {
		class, name string
		get         func(Sample) int
	}{
		{"s-pending", "pending", func(s Sample) int { return s.Pending }},
		{"s-active", "active", func(s Sample) int { return s.Active }},
		{"s-scheduled", "scheduled / waiting", func(s Sample) int { return s.Scheduled }},
		{"s-retry", "retry", func(s Sample) int { return s.Retry }},
	}
	var lines []line
	var legends []legend
	for _, se := range series {
		var pts []string
		last := 0
		for _, s := range readings {
			last = se.get(s)
			pts = append(pts, ff(q.x(s.At.Add(time.Minute/2), start, window))+","+strconv.Itoa(q.y(last)))
		}
		if len(pts) == 1 { // one reading: a short flat line
			pts = append(pts, strconv.Itoa(q.Right)+","+strconv.Itoa(q.y(last)))
		}
		lines = append(lines, line{Class: se.class, Points: strings.Join(pts, " ")})
		legends = append(legends, legend{Class: se.class, Name: se.name, Last: last})
	}
	return lines, legends
}

// outcomeBars are one stacked bar per minute (succeeded below, failed
// above) and the legend (totals over the window).
func outcomeBars(o chart, samples []Sample, start time.Time, window time.Duration) ([]bar, []legend) {
	bw := max(1.0, float64(o.Right-o.Left)*float64(time.Minute)/float64(window)*0.8)
	var bars []bar
	okSum, failSum := 0, 0
	for _, s := range samples {
		if s.Succeeded+s.Failed == 0 {
			continue
		}
		okSum += s.Succeeded
		failSum += s.Failed
		x := o.x(s.At, start, window) + bw/8
		yOK := o.y(s.Succeeded)
		yAll := o.y(s.Succeeded + s.Failed)
		label := s.At.UTC().Format("15:04") + ": " + strconv.Itoa(s.Succeeded) + " succeeded, " + strconv.Itoa(s.Failed) + " failed"
		if s.Succeeded > 0 {
			bars = append(bars, bar{Class: "s-ok", X: ff(x), W: ff(bw), Y: strconv.Itoa(yOK), H: strconv.Itoa(o.Base - yOK), Title: label})
		}
		if s.Failed > 0 {
			bars = append(bars, bar{Class: "s-fail", X: ff(x), W: ff(bw), Y: strconv.Itoa(yAll), H: strconv.Itoa(yOK - yAll), Title: label})
		}
	}
	return bars, []legend{{Class: "s-ok", Name: "succeeded", Last: okSum}, {Class: "s-fail", Name: "failed", Last: failSum}}
}

// hours writes d as "1 hour", "24 hours" or, below an hour, "30m0s".
func hours(d time.Duration) string {
	switch {
	case d == time.Hour:
		return "1 hour"
	case d > time.Hour && d%time.Hour == 0:
		return strconv.Itoa(int(d/time.Hour)) + " hours"
	}
	return d.String()
}
