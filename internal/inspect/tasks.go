package inspect

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/tasks"
)

// ListableStates are the states a task listing selects on: where a task
// waits or runs. Ended tasks are not listed (dead letters have their own
// listing).
var ListableStates = []record.State{record.StatePending, record.StateActive, record.StateScheduled,
	record.StateRetrying, record.StateDeferred, record.StateRestarting, record.StateWaiting}

// Bounds of one listing request.
const (
	// DefaultTaskLimit is a page's size when none is asked for.
	DefaultTaskLimit = 50
	// MaxTaskLimit is the largest page.
	MaxTaskLimit = 1000
	// ScanBudget is the most entries of the queues' lists and sets one
	// request reads: a filter that selects few tasks of a big queue
	// returns a short (even empty) page with a cursor where the scan
	// stopped, rather than reading the whole queue.
	ScanBudget = 2000
)

// ErrBadCursor is returned for a cursor that no listing made.
var ErrBadCursor = errors.New("inspect: malformed cursor")

// ErrBadFilter is returned for a filter that selects nothing listable (an
// unknown state, a limit out of range).
var ErrBadFilter = errors.New("inspect: invalid filter")

// TaskFilter selects the tasks of a listing; empty fields select all.
type TaskFilter struct {
	Queue         string
	States        []record.State // listed states (where the task waits), any of them
	Agent         string
	Tenant        string
	CorrelationID string
	Limit         int    // page size, 1..MaxTaskLimit (0: DefaultTaskLimit)
	Cursor        string // a TaskPage's NextCursor, "" for the first page
}

// Validate checks f's states and limit.
func (f *TaskFilter) Validate() error {
	for _, s := range f.States {
		if !slices.Contains(ListableStates, s) {
			return fmt.Errorf("%w: state %q is not one of %v (dead letters are listed by their own route)", ErrBadFilter, s, ListableStates)
		}
	}
	if f.Limit < 0 || f.Limit > MaxTaskLimit {
		return fmt.Errorf("%w: limit %d is not within 1..%d", ErrBadFilter, f.Limit, MaxTaskLimit)
	}
	return nil
}

// ParseStates splits a comma-separated list of states ("retrying,deferred").
func ParseStates(s string) []record.State {
	var out []record.State
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, record.State(p))
		}
	}
	return out
}

// ListedTask is one task of a listing (an adapter of the view,
// record.View): its record as GET /api/v1/tasks/{id} shows it, without its history (a page of tasks would carry every
// history), and ListedAs, where the listing found it. State is the
// record's; the two differ when, say, a retry that came due waits in the
// pending list (listed_as pending, state retrying). A task of asynq's with
// no agentq record has only its ID, queue and state (= ListedAs).
type ListedTask struct {
	*record.View
	History  []record.Event `json:"history,omitempty"`
	ListedAs record.State   `json:"listed_as"`
}

// TaskPage is a page of a listing. NextCursor resumes the listing where
// this page stopped; "" when the listing is complete. A page may be short,
// or empty, with a NextCursor: the request read its ScanBudget.
type TaskPage struct {
	Tasks      []ListedTask `json:"tasks"`
	NextCursor string       `json:"next_cursor"`
}

// entry is one task ID read from a source, with the position just after it.
type entry struct {
	id    string // asynq's ID ("ID" or "ID#run")
	after string
}

// source is one list or sorted set tasks wait in. A listing reads its
// sources in order, each from its own position (the cursor's pos); one
// more source (another list of pending tasks) is one more element of
// sources.
type source struct {
	name     string
	perQueue bool           // one per queue (else one for all queues)
	states   []record.State // the listed states it can yield
	// read reads up to n entries of queue's source from pos ("": its start);
	// done: nothing follows the entries read.
	read func(ctx context.Context, rdb redis.UniversalClient, queue, pos string, n int) ([]entry, bool, error)
	// listed is the listed state of a task found here, from its record (nil
	// when it has none); "" skips it (it is listed by another source).
	listed func(v *record.View) record.State
	// runs: its entries are asynq's runs ("ID#run"). An entry of a run
	// older than its record's is a superseded run's leftover (a worker
	// killed after recording the run's restart or suspend leaves the run
	// leased in the active list until asynq recovers it): skipped, the
	// task is listed where its current run waits or runs.
	runs bool
}

// sources are the places a listing reads, in order; per-queue ones first.
var sources = []source{
	{name: "pending", perQueue: true, states: []record.State{record.StatePending},
		read: listSource(broker.PendingKey), listed: always(record.StatePending), runs: true},
	{name: "lanes", perQueue: true, states: []record.State{record.StatePending},
		read: laneSource, listed: always(record.StatePending), runs: true},
	{name: "active", perQueue: true, states: []record.State{record.StateActive},
		read: listSource(broker.ActiveKey), listed: always(record.StateActive), runs: true},
	{name: "scheduled", perQueue: true, states: []record.State{record.StateScheduled, record.StateWaiting},
		read: zsetSource(broker.ScheduledKey), listed: scheduledOrWaiting, runs: true},
	{name: "retry", perQueue: true, states: []record.State{record.StateRetrying, record.StateDeferred},
		read: zsetSource(broker.RetryKey), listed: retryOrDeferred, runs: true},
	{name: "restart", states: []record.State{record.StateRestarting},
		read: zsetSource(func(string) string { return rkeys.RestartPending() }), listed: restarting},
}

func always(s record.State) func(*record.View) record.State {
	return func(*record.View) record.State { return s }
}

// restarting: a task of the restart index is listed restarting while its
// record reads so (or it has none). Its entry outlives the record's move
// on (it is freed when the restart run is delivered, or by the repair):
// a task whose restart run started, or whose record has not yet recorded
// the restart (its worker died in between), is listed from asynq's lists
// by its record's state, once.
func restarting(v *record.View) record.State {
	if v == nil || v.State == record.StateRestarting {
		return record.StateRestarting
	}
	return ""
}

// scheduledOrWaiting: a restart waits in asynq's scheduled set and in the
// restart index; it is listed once, as restarting, from the index. A
// suspended task's next run waits in the scheduled set: listed waiting.
func scheduledOrWaiting(v *record.View) record.State {
	switch {
	case v != nil && v.State == record.StateRestarting:
		return ""
	case v != nil && v.State == record.StateWaiting:
		return record.StateWaiting
	}
	return record.StateScheduled
}

// retryOrDeferred tells a retry from a deferral (both wait in asynq's
// retry set) by the record's state.
func retryOrDeferred(v *record.View) record.State {
	if v != nil && v.State == record.StateDeferred {
		return record.StateDeferred
	}
	return record.StateRetrying
}

// listSource reads an asynq list (LPUSHed: newest first) by index. The
// position is the index of the next entry. While tasks are added the
// indexes shift: a page may repeat tasks, but a task that stays in the
// list is not skipped (asynq takes from the other end).
func listSource(key func(string) string) func(context.Context, redis.UniversalClient, string, string, int) ([]entry, bool, error) {
	return func(ctx context.Context, rdb redis.UniversalClient, queue, pos string, n int) ([]entry, bool, error) {
		off := int64(0)
		if pos != "" {
			var err error
			if off, err = strconv.ParseInt(pos, 10, 64); err != nil || off < 0 {
				return nil, false, ErrBadCursor
			}
		}
		ids, err := rdb.LRange(ctx, key(queue), off, off+int64(n)-1).Result()
		if err != nil {
			return nil, false, fmt.Errorf("inspect: tasks: %w", err)
		}
		out := make([]entry, len(ids))
		for i, id := range ids {
			out[i] = entry{id: id, after: strconv.FormatInt(off+int64(i)+1, 10)}
		}
		return out, len(ids) < n, nil
	}
}

// laneSource reads the tenants' lanes of queue (internal/broker: the
// pending runs of every tenant but the default tenant's normal ones, which
// wait in asynq's pending list): tenant by tenant (sorted), each tenant's
// high, normal and low lane, each newest first by index, as listSource.
// The position is "<lane> <index> <tenant>": a tenant added or gone moves
// no other tenant's position.
func laneSource(ctx context.Context, rdb redis.UniversalClient, queue, pos string, n int) ([]entry, bool, error) {
	tenants, err := rdb.SMembers(ctx, rkeys.FairTenants(queue)).Result()
	if err != nil {
		return nil, false, fmt.Errorf("inspect: tasks: %w", err)
	}
	tenants = append(tenants, "")
	slices.Sort(tenants)
	tenants = slices.Compact(tenants)
	ti, li, off := 0, 0, int64(0)
	if pos != "" {
		f := strings.SplitN(pos, " ", 3)
		if len(f) != 3 {
			return nil, false, ErrBadCursor
		}
		b, e1 := strconv.Atoi(f[0])
		c, e2 := strconv.ParseInt(f[1], 10, 64)
		if e1 != nil || e2 != nil || b < 0 || b > 2 || c < 0 {
			return nil, false, ErrBadCursor
		}
		ti, li, off = sort.SearchStrings(tenants, f[2]), b, c
		if ti < len(tenants) && tenants[ti] != f[2] {
			li, off = 0, 0 // its tenant is gone: the next one from its start
		}
	}
	var out []entry
	for ; ti < len(tenants) && len(out) < n; ti, li, off = ti+1, 0, 0 {
		for ; li < 3 && len(out) < n; li, off = li+1, 0 {
			code := [3]string{"h", "n", "l"}[li]
			if tenants[ti] == "" && code == "n" {
				continue // asynq's pending list: the "pending" source
			}
			ids, err := rdb.LRange(ctx, rkeys.FairLane(queue, code, tenants[ti]), off, off+int64(n-len(out))-1).Result()
			if err != nil {
				return nil, false, fmt.Errorf("inspect: tasks: %w", err)
			}
			for i, id := range ids {
				out = append(out, entry{id: id, after: fmt.Sprintf("%d %d %s", li, off+int64(i)+1, tenants[ti])})
			}
			if len(out) >= n {
				return out, false, nil
			}
		}
	}
	return out, true, nil
}

// zsetSource reads a sorted set by score, then member. The position is
// "<score> <k>": the next entry is the k-th (from 0) of those scored at
// least score. Entries added or removed elsewhere in the set move no other
// entry's position.
func zsetSource(key func(string) string) func(context.Context, redis.UniversalClient, string, string, int) ([]entry, bool, error) {
	return func(ctx context.Context, rdb redis.UniversalClient, queue, pos string, n int) ([]entry, bool, error) {
		score, skip := "-inf", int64(0)
		if pos != "" {
			s, k, ok := strings.Cut(pos, " ")
			var err error
			if skip, err = strconv.ParseInt(k, 10, 64); !ok || err != nil || skip < 0 {
				return nil, false, ErrBadCursor
			}
			if _, err := strconv.ParseFloat(s, 64); err != nil {
				return nil, false, ErrBadCursor
			}
			score = s
		}
		zs, err := rdb.ZRangeByScoreWithScores(ctx, key(queue), &redis.ZRangeBy{Min: score, Max: "+inf", Offset: skip, Count: int64(n)}).Result()
		if err != nil {
			return nil, false, fmt.Errorf("inspect: tasks: %w", err)
		}
		out := make([]entry, len(zs))
		cur, k := score, skip
		for i, z := range zs {
			s := strconv.FormatFloat(z.Score, 'g', -1, 64)
			if s == cur {
				k++
			} else {
				cur, k = s, 1
			}
			id, _ := z.Member.(string)
			out[i] = entry{id: id, after: cur + " " + strconv.FormatInt(k, 10)}
		}
		return out, len(zs) < n, nil
	}
}

// segment is one source of one queue ("" for a source of all queues).
type segment struct {
	queue string
	src   int
}

// cursor is what an opaque cursor holds: the segment and the position in it.
type cursor struct {
	Queue  string `json:"q"`
	Source string `json:"s"`
	Pos    string `json:"p"`
}

func (c cursor) encode() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string) (cursor, error) {
	var c cursor
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || json.Unmarshal(b, &c) != nil || sourceIndex(c.Source) < 0 {
		return c, ErrBadCursor
	}
	return c, nil
}

func sourceIndex(name string) int {
	return slices.IndexFunc(sources, func(s source) bool { return s.name == name })
}

// segments are the segments f reads, in order: each queue's sources
// (queues sorted), then the sources of all queues.
func segments(f TaskFilter, queues []string) []segment {
	wants := func(s source) bool {
		if len(f.States) == 0 {
			return true
		}
		return slices.ContainsFunc(s.states, func(st record.State) bool { return slices.Contains(f.States, st) })
	}
	var out []segment
	for _, q := range queues {
		for i, s := range sources {
			if s.perQueue && wants(s) {
				out = append(out, segment{queue: q, src: i})
			}
		}
	}
	for i, s := range sources {
		if !s.perQueue && wants(s) {
			out = append(out, segment{src: i})
		}
	}
	return out
}

// resume finds where c resumes in segs: the index of its segment with its
// position, or of the first segment after it (its queue is gone) from its
// start.
func resume(segs []segment, c cursor) (int, string) {
	ci := sourceIndex(c.Source)
	key := func(s segment) (int, string, int) {
		g := 0
		if !sources[s.src].perQueue {
			g = 1
		}
		return g, s.queue, s.src
	}
	cg, cq, cs := key(segment{queue: c.Queue, src: ci})
	for i, s := range segs {
		g, q, src := key(s)
		switch {
		case g == cg && q == cq && src == cs:
			return i, c.Pos
		case g > cg || (g == cg && (q > cq || (q == cq && src > cs))):
			return i, ""
		}
	}
	return len(segs), ""
}

// Tasks lists the tasks f selects, a page at a time (see TaskFilter and
// TaskPage). One call reads at most ScanBudget entries of the queues'
// lists and sets, and the records of the tasks it read.
func Tasks(ctx context.Context, rdb redis.UniversalClient, f TaskFilter) (TaskPage, error) {
	page := TaskPage{Tasks: []ListedTask{}}
	if err := f.Validate(); err != nil {
		return page, err
	}
	if f.Limit == 0 {
		f.Limit = DefaultTaskLimit
	}
	queues := []string{f.Queue}
	if f.Queue == "" {
		var err error
		if queues, err = rdb.SMembers(ctx, broker.AllQueues).Result(); err != nil {
			return page, fmt.Errorf("inspect: queues: %w", err)
		}
		sort.Strings(queues)
	}
	segs := segments(f, queues)
	at, pos := 0, ""
	if f.Cursor != "" {
		c, err := decodeCursor(f.Cursor)
		if err != nil {
			return page, err
		}
		at, pos = resume(segs, c)
	}
	l := lister{rdb: rdb, store: record.NewStore(rdb), f: f, budget: ScanBudget}
	for at < len(segs) {
		seg := segs[at]
		next, done, err := l.read(ctx, seg, pos, &page)
		if err != nil {
			return page, err
		}
		if !done {
			page.NextCursor = cursor{Queue: seg.queue, Source: sources[seg.src].name, Pos: next}.encode()
			return page, nil
		}
		at, pos = at+1, ""
	}
	return page, nil
}

// lister is one listing request's state.
type lister struct {
	rdb    redis.UniversalClient
	store  *record.Store
	f      TaskFilter
	budget int // entries left to read
}

// read reads seg from pos into page until seg ends (done), the page is
// full or the budget is spent; next is the position to resume from.
func (l *lister) read(ctx context.Context, seg segment, pos string, page *TaskPage) (next string, done bool, err error) {
	src := sources[seg.src]
	for {
		want := l.f.Limit - len(page.Tasks)
		if want <= 0 || l.budget <= 0 {
			return pos, false, nil
		}
		n := min(l.budget, max(want, 100))
		ents, end, err := src.read(ctx, l.rdb, seg.queue, pos, n)
		if err != nil {
			return "", false, err
		}
		l.budget -= len(ents)
		full, last, err := l.take(ctx, seg, ents, page)
		if err != nil {
			return "", false, err
		}
		if full && (last < len(ents)-1 || !end) {
			return ents[last].after, false, nil
		}
		if end {
			return "", true, nil
		}
		pos = ents[len(ents)-1].after
	}
}

// take adds the tasks of ents that the filter selects to page, until it is
// full; full says it is, last is the index of the last entry looked at.
func (l *lister) take(ctx context.Context, seg segment, ents []entry, page *TaskPage) (full bool, last int, err error) {
	if len(ents) == 0 {
		return false, -1, nil
	}
	ids, runs := make([]string, len(ents)), make([]int, len(ents))
	for i, e := range ents {
		ids[i], runs[i], _ = tasks.ParseAsynqID(e.id)
	}
	views, err := l.store.Views(ctx, ids)
	if err != nil {
		return false, 0, fmt.Errorf("inspect: tasks: %w", err)
	}
	src := sources[seg.src]
	for i, v := range views {
		if src.runs && v != nil && runs[i] < v.Run {
			continue // a superseded run's leftover (source.runs)
		}
		if t, ok := l.selects(src, seg.queue, ids[i], v); ok {
			page.Tasks = append(page.Tasks, t)
			if len(page.Tasks) >= l.f.Limit {
				return true, i, nil
			}
		}
	}
	return false, len(ents) - 1, nil
}

// selects builds the listed task of id found in src (queue "" for a source
// of all queues; v its record, nil when none) and says whether the filter
// selects it.
func (l *lister) selects(src source, queue, id string, v *record.View) (ListedTask, bool) {
	as := src.listed(v)
	if as == "" || (len(l.f.States) > 0 && !slices.Contains(l.f.States, as)) {
		return ListedTask{}, false
	}
	if v == nil {
		v = &record.View{ID: id, Queue: queue, State: as}
	}
	f := l.f
	ok := (f.Queue == "" || src.perQueue || v.Queue == f.Queue) && (f.Agent == "" || v.Agent == f.Agent) &&
		(f.Tenant == "" || v.Tenant == f.Tenant) && (f.CorrelationID == "" || v.CorrelationID == f.CorrelationID)
	return ListedTask{View: v, ListedAs: as}, ok
}
