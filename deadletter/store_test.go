package deadletter_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/tasks"
)

// base is the dead_lettered_at of entry 0 in the fixtures; entry i is i
// seconds later, so higher i is newer.
var base = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func entry(i int, agent, class string) *deadletter.Entry {
	return &deadletter.Entry{
		ID:             fmt.Sprintf("task-%05d", i),
		Agent:          agent,
		Action:         "run",
		Params:         json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)),
		CorrelationID:  fmt.Sprintf("corr-%d", i),
		ErrorClass:     class,
		Error:          "boom " + class,
		Reason:         deadletter.ReasonNotRetryable,
		Attempts:       1,
		DeadLetteredAt: base.Add(time.Duration(i) * time.Second),
		Queue:          "default",
		EnqueuedAt:     base.Add(-time.Minute),
	}
}

// fixture is 30 entries: agents a/b alternate, classes x/y/z cycle.
func fixture() []*deadletter.Entry {
	agents, classes := []string{"a", "b"}, []string{"x", "y", "z"}
	var es []*deadletter.Entry
	for i := range 30 {
		es = append(es, entry(i, agents[i%2], classes[i%3]))
	}
	return es
}

func ids(es []*deadletter.Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.ID)
	}
	return out
}

// newestFirst returns the IDs of the entries matching agent/class, newest
// first (the fixtures have distinct times).
func newestFirst(es []*deadletter.Entry, agent, class string) []string {
	var m []*deadletter.Entry
	for _, e := range es {
		if (agent == "" || e.Agent == agent) && (class == "" || e.ErrorClass == class) {
			m = append(m, e)
		}
	}
	sort.SliceStable(m, func(i, j int) bool { return m[i].DeadLetteredAt.After(m[j].DeadLetteredAt) })
	return ids(m)
}

func putAll(t *testing.T, s *deadletter.Store, es []*deadletter.Entry) {
	t.Helper()
	for _, e := range es {
		created, err := s.Put(context.Background(), e)
		require.NoError(t, err)
		require.True(t, created, e.ID)
	}
}

// requireConsistent checks the store's invariants straight in Redis: every
// entry is in the main index (scored by its time), its agent index and its
// class index, and in no other; every index member has an entry; the set of
// index keys names exactly the non-empty agent/class indexes.
func requireConsistent(t *testing.T, rdb redis.UniversalClient) {
	t.Helper()
	ctx := context.Background()
	bodies, err := rdb.HGetAll(ctx, rkeys.DLQEntries()).Result()
	require.NoError(t, err)
	want := map[string]map[string]bool{} // index key -> ids
	add := func(k, id string) {
		if want[k] == nil {
			want[k] = map[string]bool{}
		}
		want[k][id] = true
	}
	for id, body := range bodies {
		var e deadletter.Entry
		require.NoError(t, json.Unmarshal([]byte(body), &e))
		require.Equal(t, id, e.ID)
		sc, err := rdb.ZScore(ctx, rkeys.DLQIndex(), id).Result()
		require.NoError(t, err, "entry %s not in main index", id)
		require.Equal(t, float64(e.DeadLetteredAt.UnixMilli()), sc)
		add(rkeys.DLQByAgent(e.Agent), id)
		add(rkeys.DLQByClass(e.ErrorClass), id)
	}
	n, err := rdb.ZCard(ctx, rkeys.DLQIndex()).Result()
	require.NoError(t, err)
	require.Equal(t, int64(len(bodies)), n, "main index and entries differ")
	refs, err := rdb.HGetAll(ctx, rkeys.DLQRefs()).Result()
	require.NoError(t, err)
	require.Len(t, refs, len(bodies), "refs and entries differ")
	for id, body := range bodies {
		var e deadletter.Entry
		require.NoError(t, json.Unmarshal([]byte(body), &e))
		require.Equal(t, fmt.Sprintf("%d:%s%s", len(e.Agent), e.Agent, e.ErrorClass), refs[id], "ref of %s", id)
	}

	idx, err := rdb.SMembers(ctx, rkeys.DLQIndexes()).Result()
	require.NoError(t, err)
	var wantKeys []string
	for k := range want {
		wantKeys = append(wantKeys, k)
	}
	require.ElementsMatch(t, wantKeys, idx, "index-key set")
	for k, members := range want {
		got, err := rdb.ZRange(ctx, k, 0, -1).Result()
		require.NoError(t, err)
		var w []string
		for id := range members {
			w = append(w, id)
		}
		require.ElementsMatch(t, w, got, "members of %s", k)
	}
	// No stray agent/class index outside the set.
	keys, err := rdb.Keys(ctx, rkeys.Prefix+"{dlq}:*").Result()
	require.NoError(t, err)
	for _, k := range keys {
		if strings.HasPrefix(k, rkeys.DLQByAgent("")) || strings.HasPrefix(k, rkeys.DLQByClass("")) {
			require.Contains(t, want, k, "stray index key")
		}
	}
	require.NotContains(t, keys, rkeys.DLQScratch(), "scratch key left behind")
}

// TestStore is the conformance suite: every case runs on miniredis and on a
// real redis-server, each on a fresh, empty server.
func TestStore(t *testing.T) {
	t.Parallel()
	for _, b := range redistest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			for _, tc := range suite {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					rdb, _ := b.New(t)
					tc.run(t, rdb, deadletter.NewStore(rdb))
				})
			}
		})
	}
}

var suite = []struct {
	name string
	run  func(t *testing.T, rdb redis.UniversalClient, s *deadletter.Store)
}{
	{"RoundTrip", testRoundTrip},
	{"Through", testThrough},
	{"PutStampsTimeAndValidates", testPutStampsAndValidates},
	{"IdempotentPut", testIdempotentPut},
	{"ConcurrentPutsOfOneID", testConcurrentPuts},
	{"List", testList},
	{"Delete", testDelete},
	{"Purge", testPurge},
	{"Export", testExport},
	{"ScanWithTiedScores", testScanTies},
	{"Requeue", testRequeue},
	{"CountBy", testCountBy},
	{"NoTrimming", testNoTrimming},
	{"OddNames", testOddNames},
}

// testOddNames uses agent and class names that JSON escapes or coerces:
// the indexes must still follow the entries.
func testOddNames(t *testing.T, rdb redis.UniversalClient, s *deadletter.Store) {
	ctx := context.Background()
	names := []string{"", "a:b", "{x}", "<&>", "é\"q", "bad\xff\xfeutf8", "deep"}
	for i, agent := range names {
		e := entry(i, agent, names[(i+1)%len(names)])
		e.Params = json.RawMessage(strings.Repeat("[", 2000) + strings.Repeat("]", 2000))
		_, err := s.Put(ctx, e)
		require.NoError(t, err, "%q", agent)
	}
	requireConsistent(t, rdb)
	for i, agent := range names {
		e := entry(i, names[(i+3)%len(names)], agent) // move every entry
		created, err := s.Put(ctx, e)
		require.NoError(t, err, "%q", agent)
		require.False(t, created)
	}
	requireConsistent(t, rdb)
	got, total, err := s.List(ctx, deadletter.Filter{Agent: "bad\xff\xfeutf8"})
	require.NoError(t, err)
	require.Equal(t, int64(1), total)
	require.Equal(t, "task-00002", got[0].ID) // names[(2+3)%7]
	n, err := s.Delete(ctx, ids(got)...)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	requireConsistent(t, rdb)
	n64, err := s.Purge(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(len(names)-1), n64)
	require.Empty(t, mustKeys(t, rdb))
}

func testRoundTrip(t *testing.T, rdb redis.UniversalClient, s *deadletter.Store) {
	ctx := context.Background()
	at := base.Add(1500 * time.Millisecond)
	e := &deadletter.Entry{
		ID: "t-1", Agent: "llm", Action: "chat",
		Params:        json.RawMessage(`{"prompt":"hi","n":[1,2]}`),
		CorrelationID: "c-9", ErrorClass: "quota_exhausted", ClassifiedBy: "text", Error: "429 insufficient_quota",
		Reason: deadletter.ReasonRestartsExhausted, Attempts: 3, Restarts: 2,
		DeadLetteredAt: at,
		History: []tasks.Event{
			{At: base, Event: tasks.EventQueued},
			{At: base.Add(time.Second), Event: tasks.EventDeferred, Attempt: 1, Agent: "llm", Worker: "w1"},
			{At: base.Add(2 * time.Second), Event: tasks.EventFailed, Attempt: 1, Restart: 2,
				ErrorClass: "quota_exhausted", ClassifiedBy: "text", Error: "429", DelayMS: 500, DurationMS: 42},
			{At: at, Event: tasks.EventDeadLettered, Attempt: 3, Restart: 2},
		},
		Queue: "critical", Run: 2, EnqueuedAt: base.Add(-time.Hour), Requeues: 1,
		Payload: []byte{0xff, 0x00, '{', 'x'},
	}
	created, err := s.Put(ctx, e)
	require.NoError(t, err)
	require.True(t, created)

	got, err := s.Get(ctx, "t-1")
	require.NoError(t, err)
	require.Equal(t, e, got)
	require.Equal(t, "text", got.TaskView().ClassifiedBy, "the task view of a dead letter keeps classified_by")

	// The stored JSON uses the stable field names.
	raw, err := rdb.HGet(ctx, rkeys.DLQEntries(), "t-1").Result()
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(raw), &m))
	require.Equal(t, "text", m["classified_by"])
	require.Contains(t, raw, `"error_class":"quota_exhausted","classified_by":"text"`, "the history event's too")
	for _, k := range []string{"id", "agent", "action", "params", "correlation_id", "error_class", "classified_by", "error",
		"attempts", "restarts", "dead_lettered_at", "history", "reason", "payload"} {
		require.Contains(t, m, k)
	}

	_, err = s.Get(ctx, "nope")
	require.ErrorIs(t, err, deadletter.ErrNotFound)
	require.ErrorContains(t, err, "nope")
	requireConsistent(t, rdb)
}

func testPutStampsAndValidates(t *testing.T, rdb redis.UniversalClient, _ *deadletter.Store) {
	ctx := context.Background()
	now := base.Add(time.Hour)
	s := deadletter.NewStore(rdb, deadletter.WithClock(func() time.Time { return now }))
	e := entry(1, "a", "x")
	e.DeadLetteredAt = time.Time{}
	_, err := s.Put(ctx, e)
	require.NoError(t, err)
	got, err := s.Get(ctx, e.ID)
	require.NoError(t, err)
	require.True(t, got.DeadLetteredAt.Equal(now), "got %v", got.DeadLetteredAt)
	requireConsistent(t, rdb)

	for name, bad := range map[string]*deadletter.Entry{
		"nil":            nil,
		"empty id":       {Agent: "a"},
		"invalid params": {ID: "p", Params: json.RawMessage(`{nope`)},
	} {
		_, err := s.Put(ctx, bad)
		require.ErrorIs(t, err, deadletter.ErrInvalidEntry, name)
		_, err = s.PutMany(ctx, []*deadletter.Entry{entry(2, "a", "x"), bad})
		require.ErrorIs(t, err, deadletter.ErrInvalidEntry, name)
	}
	n, err := s.Count(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "nothing of a rejected batch is stored")
}

func testIdempotentPut(t *testing.T, rdb redis.UniversalClient, s *deadletter.Store) {
	ctx := context.Background()
	e := entry(1, "a", "x")
	created, err := s.Put(ctx, e)
	require.NoError(t, err)
	require.True(t, created)
	created, err = s.Put(ctx, e)
	require.NoError(t, err)
	require.False(t, created)
	n, err := s.Count(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), n)

	// Same ID, new agent, class and time: moved between indexes.
	e2 := entry(1, "b", "y")
	e2.DeadLetteredAt = base.Add(time.Hour)
	e2.Error = "second"
	created, err = s.Put(ctx, e2)
	require.NoError(t, err)
	require.False(t, created)

	for _, tc := range []struct {
		f    deadletter.Filter
		want []string
	}{
		{deadletter.Filter{Class: "x"}, nil},
		{deadletter.Filter{Agent: "a"}, nil},
		{deadletter.Filter{Class: "y"}, []string{e.ID}},
		{deadletter.Filter{Agent: "b"}, []string{e.ID}},
		{deadletter.Filter{Agent: "b", Class: "y"}, []string{e.ID}},
		{deadletter.Filter{}, []string{e.ID}},
	} {
		got, total, err := s.List(ctx, tc.f)
		require.NoError(t, err)
		require.Equal(t, int64(len(tc.want)), total, "%+v", tc.f)
		require.Equal(t, len(tc.want), len(got))
		if len(tc.want) > 0 {
			require.Equal(t, "second", got[0].Error)
		}
	}
	got, err := s.Get(ctx, e.ID)
	require.NoError(t, err)
	require.Equal(t, e2, got)
	requireConsistent(t, rdb)

	// PutMany of a mix of known and new IDs counts only the new ones.
	created2, err := s.PutMany(ctx, []*deadletter.Entry{entry(1, "c", "z"), entry(2, "a", "x")})
	require.NoError(t, err)
	require.Equal(t, 1, created2)
	got, err = s.Get(ctx, e.ID)
	require.NoError(t, err)
	require.Equal(t, "c", got.Agent)
	requireConsistent(t, rdb)
}

func testConcurrentPuts(t *testing.T, rdb redis.UniversalClient, s *deadletter.Store) {
	ctx := context.Background()
	var wg sync.WaitGroup
	classes := []string{"x", "y", "z", "w"}
	errs := make(chan error, 8*20)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				e := entry(1, fmt.Sprintf("agent%d", (g+i)%3), classes[(g*7+i)%4])
				e.DeadLetteredAt = base.Add(time.Duration(g*100+i) * time.Millisecond)
				_, err := s.Put(ctx, e)
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	n, err := s.Count(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	requireConsistent(t, rdb)
}

func testList(t *testing.T, rdb redis.UniversalClient, s *deadletter.Store) {
	ctx := context.Background()
	es := fixture()
	// Put in shuffled order: the order of insertion must not matter.
	shuffled := slices.Clone(es)
	slices.Reverse(shuffled[10:])
	putAll(t, s, shuffled)
	requireConsistent(t, rdb)

	for _, tc := range []struct{ agent, class string }{
		{"", ""}, {"a", ""}, {"b", ""}, {"", "x"}, {"", "z"},
		{"a", "x"}, {"b", "y"}, {"a", "z"}, {"nobody", ""}, {"", "none"}, {"a", "none"},
	} {
		t.Run(tc.agent+"/"+tc.class, func(t *testing.T) {
			want := newestFirst(es, tc.agent, tc.class)
			got, total, err := s.List(ctx, deadletter.Filter{Agent: tc.agent, Class: tc.class})
			require.NoError(t, err)
			require.Equal(t, int64(len(want)), total)
			require.Equal(t, want, ids(got))

			// Paging with a small limit reassembles the same list.
			var paged []string
			for off := 0; ; off += 4 {
				page, total, err := s.List(ctx, deadletter.Filter{Agent: tc.agent, Class: tc.class, Offset: off, Limit: 4})
				require.NoError(t, err)
				require.Equal(t, int64(len(want)), total)
				require.LessOrEqual(t, len(page), 4)
				if len(page) == 0 {
					break
				}
				paged = append(paged, ids(page)...)
			}
			require.Equal(t, want, paged)

			all, err := s.IDs(ctx, deadletter.Filter{Agent: tc.agent, Class: tc.class, Limit: 1})
			require.NoError(t, err)
			require.Equal(t, want, all, "IDs ignores Limit")
		})
	}
	require.NotContains(t, mustKeys(t, rdb), rkeys.DLQScratch())
}

func mustKeys(t *testing.T, rdb redis.UniversalClient) []string {
	t.Helper()
	keys, err := rdb.Keys(context.Background(), rkeys.Prefix+"*").Result()
	require.NoError(t, err)
	return keys
}

func testDelete(t *testing.T, rdb redis.UniversalClient, s *deadletter.Store) {
	ctx := context.Background()
	es := fixture()
	putAll(t, s, es)
	n, err := s.Delete(ctx, es[0].ID, es[3].ID, "unknown", es[0].ID)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	for _, id := range []string{es[0].ID, es[3].ID} {
		_, err := s.Get(ctx, id)
		require.ErrorIs(t, err, deadletter.ErrNotFound)
	}
	got, total, err := s.List(ctx, deadletter.Filter{Agent: "a", Class: "x"})
	require.NoError(t, err)
	require.Equal(t, newestFirst(es[1:], "a", "x"), ids(got)) // es[0] is a/x, es[3] is b/x
	require.NotContains(t, ids(got), es[0].ID)
	require.Equal(t, int64(len(got)), total)
	c, err := s.Count(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(len(es)-2), c)
	requireConsistent(t, rdb)

	// Deleting the last member of an index drops the index key too.
	solo := entry(99, "solo", "only")
	putAll(t, s, []*deadletter.Entry{solo})
	n, err = s.Delete(ctx, solo.ID)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	keys := mustKeys(t, rdb)
	require.NotContains(t, keys, rkeys.DLQByAgent("solo"))
	require.NotContains(t, keys, rkeys.DLQByClass("only"))
	requireConsistent(t, rdb)
}

func testPurge(t *testing.T, rdb redis.UniversalClient, s *deadletter.Store) {
	ctx := context.Background()
	es := fixture()
	putAll(t, s, es)
	n, err := s.Purge(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(len(es)), n)
	c, err := s.Count(ctx)
	require.NoError(t, err)
	require.Zero(t, c)
	require.Empty(t, mustKeys(t, rdb), "every dead-letter key is gone")
	byAgent, byClass, err := s.CountBy(ctx)
	require.NoError(t, err)
	require.Empty(t, byAgent)
	require.Empty(t, byClass)
	list, total, err := s.List(ctx, deadletter.Filter{Agent: "a", Class: "x"})
	require.NoError(t, err)
	require.Empty(t, list)
	require.Zero(t, total)

	n, err = s.Purge(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "purging an empty store")
	putAll(t, s, es[:2]) // the store works after a purge
	requireConsistent(t, rdb)
}

func testExport(t *testing.T, rdb redis.UniversalClient, s *deadletter.Store) {
	ctx := context.Background()
	es := fixture()
	es[4].History = []tasks.Event{{At: base, Event: tasks.EventFailed, Error: "line\nbreak"}}
	putAll(t, s, es)
	for _, f := range []deadletter.Filter{{}, {Agent: "b", Limit: 1, Offset: 3}, {Agent: "a", Class: "y"}} {
		var buf bytes.Buffer
		n, err := s.Export(ctx, &buf, f)
		require.NoError(t, err)
		want := newestFirst(es, f.Agent, f.Class)
		require.Equal(t, len(want), n)

		byID := map[string]*deadletter.Entry{}
		for _, e := range es {
			byID[e.ID] = e
		}
		var got []string
		sc := bufio.NewScanner(&buf)
		for sc.Scan() {
			var e deadletter.Entry
			require.NoError(t, json.Unmarshal(sc.Bytes(), &e), "line %q", sc.Text())
			require.Equal(t, byID[e.ID], &e)
			got = append(got, e.ID)
		}
		require.NoError(t, sc.Err())
		require.Equal(t, want, got)
	}

	// A failing writer stops the export with its error.
	wErr := errors.New("disk full")
	_, err := s.Export(ctx, failWriter{wErr}, deadletter.Filter{})
	require.ErrorIs(t, err, wErr)
}

type failWriter struct{ err error }

func (w failWriter) Write([]byte) (int, error) { return 0, w.err }

// testScanTies pages through more entries than one page that share dead
// letter times, so the score-keyed paging has to handle ties across pages.
func testScanTies(t *testing.T, rdb redis.UniversalClient, s *deadletter.Store) {
	ctx := context.Background()
	var es []*deadletter.Entry
	for i := range 1300 {
		e := entry(i, []string{"a", "b"}[i%2], []string{"x", "y"}[i%3%2])
		switch {
		case i < 700:
			e.DeadLetteredAt = base // 700 ties: more than a page
		case i < 1250:
			e.DeadLetteredAt = base.Add(time.Second) // straddles a page boundary
		}
		es = append(es, e)
	}
	created, err := s.PutMany(ctx, es)
	require.NoError(t, err)
	require.Equal(t, len(es), created)
	at := map[string]time.Time{}
	for _, e := range es {
		at[e.ID] = e.DeadLetteredAt
	}
	for _, f := range []deadletter.Filter{{}, {Agent: "a"}, {Agent: "b", Class: "x"}} {
		all, err := s.IDs(ctx, f)
		require.NoError(t, err)
		var want []string
		for _, e := range es {
			if (f.Agent == "" || e.Agent == f.Agent) && (f.Class == "" || e.ErrorClass == f.Class) {
				want = append(want, e.ID)
			}
		}
		require.ElementsMatch(t, want, all, "%+v: every ID exactly once", f)
		for i := 1; i < len(all); i++ {
			require.False(t, at[all[i-1]].Before(at[all[i]]), "newest first")
		}
		var buf bytes.Buffer
		n, err := s.Export(ctx, &buf, f)
		require.NoError(t, err)
		require.Equal(t, len(want), n)
		require.Equal(t, len(want), strings.Count(buf.String(), "\n"))
	}
}

func mustGet(t *testing.T, s *deadletter.Store, id string) *deadletter.Entry {
	t.Helper()
	e, err := s.Get(context.Background(), id)
	require.NoError(t, err)
	return e
}

func testRequeue(t *testing.T, rdb redis.UniversalClient, s *deadletter.Store) {
	ctx := context.Background()
	es := fixture()[:4]
	putAll(t, s, es)

	t.Run("success", func(t *testing.T) {
		calls := 0
		got, err := s.Requeue(ctx, es[0].ID, func(_ context.Context, e *deadletter.Entry) error {
			calls++
			require.Equal(t, es[0], e)
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, 1, calls)
		require.Equal(t, es[0], got)
		_, err = s.Get(ctx, es[0].ID)
		require.ErrorIs(t, err, deadletter.ErrNotFound)
		requireConsistent(t, rdb)
	})
	t.Run("enqueue fails: entry kept", func(t *testing.T) {
		qErr := errors.New("redis down")
		got, err := s.Requeue(ctx, es[1].ID, func(context.Context, *deadletter.Entry) error { return qErr })
		require.ErrorIs(t, err, qErr)
		require.Nil(t, got)
		require.Equal(t, es[1], mustGet(t, s, es[1].ID))
		requireConsistent(t, rdb)
	})
	t.Run("unknown id", func(t *testing.T) {
		calls := 0
		_, err := s.Requeue(ctx, "ghost", func(context.Context, *deadletter.Entry) error { calls++; return nil })
		require.ErrorIs(t, err, deadletter.ErrNotFound)
		require.Zero(t, calls)
	})
	t.Run("dead-lettered again during enqueue: newer entry kept", func(t *testing.T) {
		newer := entry(2, "b", "z")
		newer.DeadLetteredAt = base.Add(time.Hour)
		newer.Requeues = 1
		got, err := s.Requeue(ctx, es[2].ID, func(ctx context.Context, e *deadletter.Entry) error {
			_, err := s.Put(ctx, newer) // a fast worker failed the requeued task again
			return err
		})
		require.NoError(t, err)
		require.Equal(t, es[2], got)
		require.Equal(t, newer, mustGet(t, s, es[2].ID))
		requireConsistent(t, rdb)
	})
	n, err := s.Count(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(3), n)
}

func testCountBy(t *testing.T, rdb redis.UniversalClient, s *deadletter.Store) {
	ctx := context.Background()
	byAgent, byClass, err := s.CountBy(ctx)
	require.NoError(t, err)
	require.Empty(t, byAgent)
	require.Empty(t, byClass)
	es := fixture()
	noAgent := entry(100, "", "invalid_request")
	putAll(t, s, append(es, noAgent))
	byAgent, byClass, err = s.CountBy(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"a": 15, "b": 15, "": 1}, byAgent)
	require.Equal(t, map[string]int64{"x": 10, "y": 10, "z": 10, "invalid_request": 1}, byClass)
	requireConsistent(t, rdb)
}

// testNoTrimming stores past asynq's 10,000-task archive limit, with
// times spread over more than its 90 days, and loses nothing.
func testNoTrimming(t *testing.T, rdb redis.UniversalClient, s *deadletter.Store) {
	ctx := context.Background()
	const n = 12000
	es := make([]*deadletter.Entry, n)
	old := base.Add(-365 * 24 * time.Hour)
	for i := range es {
		es[i] = entry(i, []string{"a", "b", "c"}[i%3], "x")
		es[i].DeadLetteredAt = old.Add(time.Duration(i) * time.Hour)
		es[i].History = []tasks.Event{{At: old, Event: tasks.EventFailed, ErrorClass: "x"}}
	}
	created, err := s.PutMany(ctx, es)
	require.NoError(t, err)
	require.Equal(t, n, created)

	c, err := s.Count(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(n), c)
	page, total, err := s.List(ctx, deadletter.Filter{})
	require.NoError(t, err)
	require.Equal(t, int64(n), total)
	require.Len(t, page, deadletter.DefaultLimit)
	require.Equal(t, es[n-1].ID, page[0].ID, "newest first")
	last, _, err := s.List(ctx, deadletter.Filter{Offset: n - 1})
	require.NoError(t, err)
	require.Len(t, last, 1)
	require.Equal(t, es[0].ID, last[0].ID, "the oldest, a year old, is still there")

	all, err := s.IDs(ctx, deadletter.Filter{})
	require.NoError(t, err)
	require.Len(t, all, n)
	want := ids(es)
	slices.Reverse(want)
	require.Equal(t, want, all)

	var buf bytes.Buffer
	exported, err := s.Export(ctx, &buf, deadletter.Filter{Agent: "b"})
	require.NoError(t, err)
	require.Equal(t, n/3, exported)

	byAgent, byClass, err := s.CountBy(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"a": n / 3, "b": n / 3, "c": n / 3}, byAgent)
	require.Equal(t, map[string]int64{"x": n}, byClass)
}

// testThrough: Filter.Through keeps IDs and Export to the entries
// dead-lettered at or before it.
func testThrough(t *testing.T, _ redis.UniversalClient, s *deadletter.Store) {
	ctx := context.Background()
	es := fixture()
	_, err := s.PutMany(ctx, es)
	require.NoError(t, err)
	through := es[9].DeadLetteredAt // entries 0..9
	got, err := s.IDs(ctx, deadletter.Filter{Through: through})
	require.NoError(t, err)
	require.Len(t, got, 10)
	require.Equal(t, es[9].ID, got[0])
	got, err = s.IDs(ctx, deadletter.Filter{Agent: "a", Through: through}) // 0, 2, 4, 6, 8
	require.NoError(t, err)
	require.Equal(t, []string{es[8].ID, es[6].ID, es[4].ID, es[2].ID, es[0].ID}, got)
	var buf bytes.Buffer
	n, err := s.Export(ctx, &buf, deadletter.Filter{Class: "x", Through: through}) // 0, 3, 6, 9
	require.NoError(t, err)
	require.Equal(t, 4, n)
}
