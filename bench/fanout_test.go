package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/tasks"
	"github.com/agentq/agentq/worker"
)

// BenchmarkFanOut's knobs (environment, optional):
//
//	AGENTQ_BENCH_FANOUT          children per fan-out (1000: tasks.MaxChildren)
//	AGENTQ_BENCH_FANOUT_ROUNDS   fan-outs per topology (3)
//	AGENTQ_BENCH_FANOUT_WORKERS  in-process workers, concurrency 50 each (2)

// hlFanOut is BenchmarkFanOut's headline.
const hlFanOut = "1000-child fan-out children/s" // BenchmarkFanOut

// The fan-out benchmark's Go agents.
const (
	fanParentAgent = "fan-parent"
	fanChildAgent  = "fan-child"
)

// fanAgents are BenchmarkFanOut's agents: the parent suspends with n
// children (mode all) and, resumed, checks it got every child's end; a
// child succeeds at once. They count every call (per task ID) and stamp
// the parent's resumed start and each child's return, on this process's
// clock.
type fanAgents struct {
	n  int
	mu sync.Mutex
	// calls counts the calls of each task; resumed the parent's resumed
	// calls; started the first resumed call's start; returned each child's
	// last return.
	calls    map[string]int
	resumed  map[string]int
	started  map[string]time.Time
	returned map[string]time.Time
	bad      []string // what a resumed parent found wrong
}

func newFanAgents(n int) *fanAgents {
	return &fanAgents{n: n, calls: map[string]int{}, resumed: map[string]int{}, started: map[string]time.Time{}, returned: map[string]time.Time{}}
}

func (f *fanAgents) parent(_ context.Context, req agent.Request) (json.RawMessage, error) {
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[req.TaskID]++
	if req.Resume == 0 {
		kids := make([]agent.Child, f.n)
		for i := range kids {
			kids[i] = agent.Child{Agent: fanChildAgent}
		}
		return nil, agent.Suspend(agent.Wait{Children: kids, Mode: "all"})
	}
	f.resumed[req.TaskID]++
	if _, ok := f.started[req.TaskID]; !ok {
		f.started[req.TaskID] = now
	}
	ok := 0
	for i, c := range req.Children {
		if want := fmt.Sprintf("%s.%d", req.TaskID, i+1); c.ID != want {
			f.bad = append(f.bad, fmt.Sprintf("%s: child %d is %s, not %s", req.TaskID, i+1, c.ID, want))
		}
		if string(c.State) == string(tasks.StateSucceeded) {
			ok++
		}
	}
	if len(req.Children) != f.n || ok != f.n {
		f.bad = append(f.bad, fmt.Sprintf("%s resumed with %d children, %d succeeded; want %d", req.TaskID, len(req.Children), ok, f.n))
	}
	return json.RawMessage(fmt.Sprintf(`{"children":%d}`, len(req.Children))), nil
}

func (f *fanAgents) child(_ context.Context, req agent.Request) (json.RawMessage, error) {
	f.mu.Lock()
	f.calls[req.TaskID]++
	f.returned[req.TaskID] = time.Now()
	f.mu.Unlock()
	return json.RawMessage(`"ok"`), nil
}

// fanRound is one fan-out's figures.
type fanRound struct {
	elapsed   time.Duration // enqueue of the parent → its success
	resumeLat time.Duration // the last child's terminal write → the parent's resumed start
	returnLat time.Duration // the last child's agent return → the parent's resumed start
	dupCalls  int           // child calls beyond one per child
}

// BenchmarkFanOut (#37 §4): a fan-out of 1,000 children completes, on one
// standalone redis-server and on a 6-node Redis Cluster (3 masters, 3
// replicas), with every child ended exactly once and the parent resumed
// exactly once. In-process workers (AGENTQ_BENCH_FANOUT_WORKERS, 50 slots
// each) run a Go parent that suspends with 1,000 children (mode all) and
// Go children that succeed at once. Each round enqueues one parent and
// clocks it to its success; it prints the time, children/s, and the
// children half of the resume latency: the last child's terminal write
// (its `succeeded` event's time, stamped by the worker in this process)
// to the parent's resumed attempt's start (the agent's call), and from the
// last child agent's return. Correctness is checked, not timing: every
// child's record succeeded with exactly one terminal event, the parent's
// history holds exactly one `resumed` (by children), its agent was
// resumed once with every child's end in spawn order.
func BenchmarkFanOut(b *testing.B) {
	skipShort(b)
	n := envInt("AGENTQ_BENCH_FANOUT", tasks.MaxChildren)
	rounds := envInt("AGENTQ_BENCH_FANOUT_ROUNDS", 3)
	k := envInt("AGENTQ_BENCH_FANOUT_WORKERS", 2)
	res := map[string][]fanRound{}
	b.Run("standalone", func(b *testing.B) {
		srv := redistest.Start(b)
		r := config.Default().Redis
		r.URL = srv.URL()
		for range b.N {
			res["standalone"] = fanOutRounds(b, r, n, rounds, k)
		}
	})
	b.Run("cluster", func(b *testing.B) {
		cl := redistest.StartCluster(b)
		r := config.Default().Redis
		r.URL, r.Cluster = "", &config.Cluster{Addrs: cl.Addrs()}
		for range b.N {
			res["cluster"] = fanOutRounds(b, r, n, rounds, k)
		}
	})
	var line []string
	for _, topo := range []string{"standalone", "cluster"} {
		rs := res[topo]
		if len(rs) == 0 {
			continue
		}
		var el, lat, ret []time.Duration
		dups := 0
		for _, r := range rs {
			el, lat, ret = append(el, r.elapsed), append(lat, r.resumeLat), append(ret, r.returnLat)
			dups += r.dupCalls
		}
		e := percentile(el, 50)
		report("fan-out of %d children (%s, %d workers x 50 slots, %d rounds): median %.2fs to complete, %.0f children/s; last child's terminal write → parent's resumed start: median %.2f ms (max %.2f ms); last child's return → it: median %.2f ms; every child ended once, the parent resumed once; extra child calls: %d",
			n, topo, k, len(rs), e.Seconds(), float64(n)/e.Seconds(), msOf(percentile(lat, 50)), msOf(percentile(lat, 100)), msOf(percentile(ret, 50)), dups)
		line = append(line, fmt.Sprintf("%s %.0f (%.2fs; children's resume %.2f ms)", topo, float64(n)/e.Seconds(), e.Seconds(), msOf(percentile(lat, 50))))
	}
	if len(line) > 0 {
		headline(hlFanOut, "%s; every child ended once, the parent resumed once", strings.Join(line, ", "))
	}
}

// msOf is d in milliseconds.
func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// fanOutRounds starts k workers on r and runs rounds fan-outs of n
// children one after another, checking each (see BenchmarkFanOut).
func fanOutRounds(b *testing.B, r config.Redis, n, rounds, k int) []fanRound {
	ctx := context.Background()
	rdb, err := r.NewClient(nil)
	if err != nil {
		b.Fatal(err)
	}
	defer rdb.Close()
	f := newFanAgents(n)
	stop := startFanWorkers(b, r, k, f)
	defer stop()
	var out []fanRound
	for i := range rounds {
		id := fmt.Sprintf("fan%d", i+1)
		t0 := time.Now()
		if _, err := tasks.NewClient(rdb).Enqueue(ctx, tasks.Task{ID: id, Agent: fanParentAgent}); err != nil {
			b.Fatal(err)
		}
		if err := waitState(ctx, rdb, id, tasks.StateSucceeded, 5*time.Minute); err != nil {
			b.Fatal(err)
		}
		fr := fanRound{elapsed: time.Since(t0)}
		if err := checkFanOut(ctx, rdb, f, id, &fr); err != nil {
			b.Fatal(err)
		}
		detail("round %d: %d children in %.2fs; last child's terminal write → parent's resumed start %.2f ms", i+1, n, fr.elapsed.Seconds(), msOf(fr.resumeLat))
		out = append(out, fr)
	}
	return out
}

// startFanWorkers starts k in-process workers (concurrency 50) on r
// running f's agents and returns their stop.
func startFanWorkers(b *testing.B, r config.Redis, k int, f *fanAgents) func() {
	var stops []func() error
	stop := func() {
		for _, s := range stops {
			if err := s(); err != nil {
				b.Error(err)
			}
		}
	}
	for range k {
		cfg := config.Default()
		cfg.Redis = r
		cfg.Worker.Concurrency, cfg.Worker.ShutdownTimeout = 50, 5*time.Second
		rdb, err := r.NewClient(nil)
		if err != nil {
			stop()
			b.Fatal(err)
		}
		w, err := worker.New(cfg, rdb, worker.WithLogger(discardLogger()),
			worker.WithAgent(fanParentAgent, agent.Func(f.parent)), worker.WithAgent(fanChildAgent, agent.Func(f.child)))
		if err != nil {
			stop()
			b.Fatal(err)
		}
		rctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(rctx) }()
		stops = append(stops, func() error { cancel(); err := <-done; _ = rdb.Close(); return err })
	}
	return stop
}

// checkFanOut checks fan-out id's exactly-once properties and fills in
// fr's latencies and duplicate calls.
func checkFanOut(ctx context.Context, rdb redis.UniversalClient, f *fanAgents, id string, fr *fanRound) error {
	st := tasks.NewStore(rdb)
	v, err := st.Get(ctx, id)
	if err != nil {
		return err
	}
	resumed := 0
	for _, ev := range v.History {
		if ev.Event == tasks.EventResumed {
			resumed++
			if ev.By != "children" {
				return fmt.Errorf("%s resumed by %q", id, ev.By)
			}
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.bad) > 0 {
		return fmt.Errorf("%v", f.bad)
	}
	if resumed != 1 || f.resumed[id] != 1 || len(v.Children) != f.n {
		return fmt.Errorf("%s: %d resumed events, %d resumed calls, %d children; want 1, 1, %d", id, resumed, f.resumed[id], len(v.Children), f.n)
	}
	var lastEnd, lastReturn time.Time
	for _, c := range v.Children {
		cv, err := st.Get(ctx, c)
		if err != nil {
			return err
		}
		ends := 0
		for _, ev := range cv.History {
			if ev.Event == tasks.EventSucceeded || ev.Event == tasks.EventDeadLettered || ev.Event == tasks.EventTaskCanceled {
				ends++
				if ev.At.After(lastEnd) {
					lastEnd = ev.At
				}
			}
		}
		if cv.State != tasks.StateSucceeded || ends != 1 {
			return fmt.Errorf("child %s: %s with %d terminal events; want succeeded, 1", c, cv.State, ends)
		}
		if f.returned[c].After(lastReturn) {
			lastReturn = f.returned[c]
		}
		fr.dupCalls += f.calls[c] - 1
	}
	fr.resumeLat = f.started[id].Sub(lastEnd)
	fr.returnLat = f.started[id].Sub(lastReturn)
	return nil
}
