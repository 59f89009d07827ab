package usage

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/redisx"
	"github.com/agentq/agentq/internal/rkeys"
)

// The fleet's totals, in Redis: one hash per hour (rkeys.UsageHour) of
// counters per series (agent, tenant, model), added to by every worker's
// Recorder in one script per flush, so sums are exact: tokens as counted,
// cost in integer micro-dollars, each counter saturating at MaxSum. Each hour's keys expire Retention after the hour
// ends. An hour counts at most MaxSeries series; see totalsScript for what
// happens beyond.

// DefaultRetention is how long an hour's totals are kept (usage.retention).
const DefaultRetention = 90 * 24 * time.Hour

// DefaultMaxSeries bounds the distinct (agent, tenant, model) series one
// hour counts (usage.max_series).
const DefaultMaxSeries = 10000

// Other is the tenant (and, past the overflow, the agent and model) that
// series beyond an hour's bound are counted under.
const Other = "other"

// sep separates the parts of a series and its counter in a field name; it
// is removed from names (Clean).
const sep = "\x1f"

// counters are the field suffixes of a series, in Counts' order.
var counters = [...]string{"in", "out", "cached", "total", "cost", "n"}

// ErrBadGroup is returned for a grouping other than agent, tenant or model.
var ErrBadGroup = errors.New("usage: group by agent, tenant or model")

// Series names one series of the totals.
type Series struct {
	Agent  string `json:"agent"`
	Tenant string `json:"tenant"`
	Model  string `json:"model"`
}

func (s Series) field() string { return s.Agent + sep + s.Tenant + sep + s.Model }

// Counts are totals: tokens, cost and the attempts that reported usage.
type Counts struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	CachedTokens int64 `json:"cached_tokens"`
	TotalTokens  int64 `json:"total_tokens"`
	// CostMicroUSD is the cost in millionths of a dollar: the exact sum.
	CostMicroUSD int64 `json:"-"`
	// CostUSD is CostMicroUSD in dollars (set by the readers).
	CostUSD  float64 `json:"cost_usd"`
	Attempts int64   `json:"attempts"`
}

// fields are c's counters, in the order of counters.
func (c *Counts) fields() [6]*int64 {
	return [6]*int64{&c.InputTokens, &c.OutputTokens, &c.CachedTokens, &c.TotalTokens, &c.CostMicroUSD, &c.Attempts}
}

// values are c's counters, in the order of counters.
func (c *Counts) values() [6]int64 {
	var v [6]int64
	for i, f := range c.fields() {
		v[i] = *f
	}
	return v
}

// Plus adds o to c, each counter saturating at MaxSum (SatAdd).
func (c *Counts) Plus(o Counts) {
	add := o.values()
	for i, f := range c.fields() {
		*f = SatAdd(*f, add[i])
	}
	c.CostUSD = float64(c.CostMicroUSD) / 1e6
}

// MicroUSD is usd in millionths of a dollar, rounded, within [0, MaxSum].
func MicroUSD(usd float64) int64 {
	return min(int64(math.Round(clampCost(usd, float64(MaxSum)/1e6)*1e6)), MaxSum)
}

// countsOf are an Entry's counts (one attempt), clamped (Usage.Clamp).
func countsOf(e Entry) Counts {
	u := e.Usage.Clamp()
	return Counts{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CachedTokens: u.CachedTokens,
		TotalTokens: u.TotalTokens, CostMicroUSD: MicroUSD(u.CostUSD), Attempts: 1}
}

// Clean is name as a series part: the separator removed, "" as "-".
func Clean(name string) string {
	name = strings.ReplaceAll(name, sep, "")
	if name == "" {
		return "-"
	}
	return name
}

// unixHour is the hour t falls in, in hours since the Unix epoch.
func unixHour(t time.Time) int64 { return t.Unix() / 3600 }

// totalsScript adds a flush's counts to the hours they fall in, once per
// flush number, all or nothing, bounding each hour's series and
// saturating each counter at MaxSum; its KEYS, ARGV and reply are
// documented in lua/totals.lua.
var totalsScript = scripts.Script("lua/totals.lua")

// scripts are the package's Lua (lua/*.lua); C.other is Other, C.sep is
// sep (as Lua 5.1 writes it: a decimal escape).
//
//go:embed lua/*.lua
var luaFiles embed.FS

var scripts = redisx.NewScripts("usage", luaFiles, map[string]map[string]string{"C": scriptConstants()})

func scriptConstants() map[string]string {
	c := redisx.Literals(map[string]any{"other": Other})
	c["sep"] = fmt.Sprintf(`"\%03d"`, sep[0])
	return c
}

// Hour is one hour's totals.
type Hour struct {
	// At is the hour's start (UTC).
	At time.Time
	// Series are the hour's totals by series.
	Series map[Series]Counts
}

// Read returns the hours from the one of from to the one of to (both
// included) that hold totals, oldest first: one pipelined HGETALL per hour
// (all in the {usage} slot).
func Read(ctx context.Context, rdb redis.UniversalClient, from, to time.Time) ([]Hour, error) {
	first, last := unixHour(from), unixHour(to)
	if last < first {
		return nil, nil
	}
	if limit := int64(DefaultRetention/time.Hour) * 4; last-first > limit {
		first = last - limit // one bounded read
	}
	pipe := rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, 0, last-first+1)
	for h := first; h <= last; h++ {
		cmds = append(cmds, pipe.HGetAll(ctx, rkeys.UsageHour(h)))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("usage: reading totals: %w", err)
	}
	var out []Hour
	for i, c := range cmds {
		if len(c.Val()) == 0 {
			continue
		}
		out = append(out, Hour{At: time.Unix((first+int64(i))*3600, 0).UTC(), Series: parseHour(c.Val())})
	}
	return out, nil
}

func parseHour(fields map[string]string) map[Series]Counts {
	out := map[Series]Counts{}
	for f, v := range fields {
		parts := strings.Split(f, sep)
		if len(parts) != 4 {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			continue
		}
		s := Series{Agent: parts[0], Tenant: parts[1], Model: parts[2]}
		c := out[s]
		for i, name := range counters {
			if name == parts[3] {
				*c.fields()[i] = n
			}
		}
		c.CostUSD = float64(c.CostMicroUSD) / 1e6
		out[s] = c
	}
	return out
}

// Group is the totals of one agent, tenant or model over a window.
type Group struct {
	// By is what the totals are grouped by: agent, tenant or model.
	By string `json:"by"`
	// Key is the agent, tenant or model.
	Key string `json:"key"`
	Counts
}

// HourTotal is the totals of one hour, all series together.
type HourTotal struct {
	At time.Time `json:"hour"`
	Counts
}

// Report is the totals over a window: by group, and per hour.
type Report struct {
	By     string      `json:"by"`
	From   time.Time   `json:"from"`
	To     time.Time   `json:"to"`
	Total  Counts      `json:"total"`
	Groups []Group     `json:"groups"`
	Hours  []HourTotal `json:"hours"`
}

// ValidBy reports whether by is a grouping Summarize knows ("" is agent).
func ValidBy(by string) error {
	switch by {
	case "", "agent", "tenant", "model":
		return nil
	}
	return fmt.Errorf("%w, not %q", ErrBadGroup, by)
}

// Summarize reads the totals of the hours from since before now to now's
// hour, grouped by by (agent, tenant or model; "": agent), largest total
// tokens first.
func Summarize(ctx context.Context, rdb redis.UniversalClient, by string, since time.Duration, now time.Time) (Report, error) {
	if err := ValidBy(by); err != nil {
		return Report{}, err
	}
	if by == "" {
		by = "agent"
	}
	from := now.Add(-since)
	hours, err := Read(ctx, rdb, from, now)
	if err != nil {
		return Report{}, err
	}
	r := Report{By: by, From: from.UTC(), To: now.UTC(), Groups: []Group{}, Hours: []HourTotal{}}
	groups := map[string]*Counts{}
	for _, h := range hours {
		ht := HourTotal{At: h.At}
		for s, c := range h.Series {
			key := map[string]string{"agent": s.Agent, "tenant": s.Tenant, "model": s.Model}[by]
			g := groups[key]
			if g == nil {
				g = &Counts{}
				groups[key] = g
			}
			g.Plus(c)
			ht.Plus(c)
			r.Total.Plus(c)
		}
		r.Hours = append(r.Hours, ht)
	}
	for k, c := range groups {
		r.Groups = append(r.Groups, Group{By: by, Key: k, Counts: *c})
	}
	sort.Slice(r.Groups, func(i, j int) bool {
		a, b := r.Groups[i], r.Groups[j]
		if a.TotalTokens != b.TotalTokens {
			return a.TotalTokens > b.TotalTokens
		}
		return a.Key < b.Key
	})
	return r, nil
}
