// Package charts keeps the console Overview's chart series in Redis, per
// minute and bounded, so that every `enqueuer serve` draws the same charts
// and a restart loses none of them.
//
// Two series are kept, in one hash (rkeys.ChartCounts) with an index of
// its minutes (rkeys.ChartMinutes), both under the {charts} hash tag:
//
//   - attempts that succeeded and failed, per minute: every worker counts
//     its attempts in memory (Counter) and adds them to Redis in one small
//     script call per flush interval (DefaultFlushEvery), whatever its
//     throughput: no Redis call is made per task;
//   - queue sizes (pending, active, scheduled, retry summed over the
//     queues), per minute: the console's sampler writes what it read
//     (RecordQueues); several consoles write the same minute's field, the
//     last one wins.
//
// Every write trims the minutes older than Keep (DefaultKeep, 24 hours):
// the hash holds at most about three fields per minute of Keep.
package charts

import (
	"context"
	"embed"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/redisx"
	"github.com/agentq/agentq/internal/rkeys"
)

// DefaultKeep is how long the per-minute series are kept.
const DefaultKeep = 24 * time.Hour

// Field suffixes of a minute in rkeys.ChartCounts.
const (
	fieldOK     = "ok"
	fieldFail   = "fail"
	fieldQueues = "q"
)

// scripts are the package's Lua (lua/*.lua), F.name naming a minute's
// field suffix.
//
//go:embed lua/*.lua
var luaFiles embed.FS

var scripts = redisx.NewScripts("charts", luaFiles, map[string]map[string]string{
	"F": redisx.Literals(map[string]any{"ok": fieldOK, "fail": fieldFail, "q": fieldQueues}),
})

// chartCountScript adds a worker's attempt counts to their minutes, and
// trims the old minutes (lua/count.lua).
var chartCountScript = scripts.Script("lua/trim.lua", "lua/count.lua")

// chartQueuesScript sets a minute's queue sizes, and trims the old
// minutes (lua/queues.lua).
var chartQueuesScript = scripts.Script("lua/trim.lua", "lua/queues.lua")

// unixMinute is the minute t falls in, in minutes since the Unix epoch.
func unixMinute(t time.Time) int64 { return t.Unix() / 60 }

// oldest is the oldest minute kept at now.
func oldest(now time.Time, keep time.Duration) int64 {
	if keep <= 0 {
		keep = DefaultKeep
	}
	return unixMinute(now.Add(-keep)) + 1
}

// Queues are the queue sizes, summed over the queues.
type Queues struct {
	Pending, Active, Scheduled, Retry int
}

// RecordQueues stores q as the queue sizes of the minute of at (replacing
// what an earlier reading of that minute stored), and trims the minutes
// older than keep (zero: DefaultKeep) before at.
func RecordQueues(ctx context.Context, rdb redis.UniversalClient, at time.Time, q Queues, keep time.Duration) error {
	v := fmt.Sprintf("%d %d %d %d", q.Pending, q.Active, q.Scheduled, q.Retry)
	err := chartQueuesScript.Run(ctx, rdb, []string{rkeys.ChartCounts(), rkeys.ChartMinutes()},
		oldest(at, keep), unixMinute(at), v).Err()
	if err != nil {
		return fmt.Errorf("charts: recording queue sizes: %w", err)
	}
	return nil
}

// Minute is what the series hold for one minute.
type Minute struct {
	// At is the minute's start (UTC).
	At time.Time
	// Queues are the sizes read in the minute; nil when none was.
	Queues *Queues
	// Succeeded and Failed are the attempts that ended in the minute.
	Succeeded, Failed int
}

// Read returns the minutes from the one of from to the one of to (both
// included) that hold anything, oldest first: one HMGET.
func Read(ctx context.Context, rdb redis.UniversalClient, from, to time.Time) ([]Minute, error) {
	first, last := unixMinute(from), unixMinute(to)
	if last < first {
		return nil, nil
	}
	if last-first > 7*24*60 {
		first = last - 7*24*60 // a week at most: one bounded read
	}
	fields := make([]string, 0, 3*(last-first+1))
	for m := first; m <= last; m++ {
		s := strconv.FormatInt(m, 10) + ":"
		fields = append(fields, s+fieldOK, s+fieldFail, s+fieldQueues)
	}
	vals, err := rdb.HMGet(ctx, rkeys.ChartCounts(), fields...).Result()
	if err != nil {
		return nil, fmt.Errorf("charts: reading: %w", err)
	}
	var out []Minute
	for i := 0; i+2 < len(vals); i += 3 {
		mn := Minute{At: time.Unix((first+int64(i/3))*60, 0).UTC()}
		mn.Succeeded, mn.Failed = count(vals[i]), count(vals[i+1])
		if s, ok := vals[i+2].(string); ok {
			mn.Queues = parseQueues(s)
		}
		if mn.Queues != nil || mn.Succeeded != 0 || mn.Failed != 0 {
			out = append(out, mn)
		}
	}
	return out, nil
}

func count(v any) int {
	s, _ := v.(string)
	n, _ := strconv.Atoi(s)
	return n
}

func parseQueues(s string) *Queues {
	f := strings.Fields(s)
	if len(f) != 4 {
		return nil
	}
	var n [4]int
	for i := range f {
		v, err := strconv.Atoi(f[i])
		if err != nil {
			return nil
		}
		n[i] = v
	}
	return &Queues{Pending: n[0], Active: n[1], Scheduled: n[2], Retry: n[3]}
}
