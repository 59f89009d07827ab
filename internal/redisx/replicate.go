package redisx

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Writes that must survive a failover (redis.wait_replicas): after the
// writes, WAIT on the same connection, on every master that took one.
//
// WAIT blocks until the replicas have acknowledged every write made *on
// that connection* before it, so it must travel in the same pipeline as
// the writes: a WAIT on another connection (a pool's next free one) waits
// for nothing. On one server or a Sentinel master a pipeline uses one
// connection, so the calls and one WAIT go together. On a Cluster the calls
// are grouped by the master of their first key, and each group goes, with
// its own WAIT, through that master's own client: go-redis would send a
// keyless WAIT to a random node, or to all of them on fresh connections.
// Groups that a master refuses because the slot moved or the cluster is
// failing over (MOVED, ASK, CLUSTERDOWN, TRYAGAIN, READONLY, LOADING,
// MASTERDOWN: nothing was written) are sent again, after the client has
// reloaded the slot map, for a few seconds.

// ErrNotReplicated is the sentinel of a *ReplicationError.
var ErrNotReplicated = errors.New("write not acknowledged by enough replicas")

// ReplicationError says that a master acknowledged a write but too few of
// its replicas did within the timeout: the write is on the master and may
// yet reach the replicas, but a failover now could lose it.
type ReplicationError struct {
	Addr    string // the master (host:port; empty when not known)
	Want    int
	Got     int
	Timeout time.Duration
}

func (e *ReplicationError) Error() string {
	at := ""
	if e.Addr != "" {
		at = " at " + e.Addr
	}
	return fmt.Sprintf("redis: write%s reached %d of the %d replicas redis.wait_replicas asks for within %s",
		at, e.Got, e.Want, e.Timeout)
}

// Is makes errors.Is(err, ErrNotReplicated) true.
func (e *ReplicationError) Is(target error) bool { return target == ErrNotReplicated }

// Replication asks that writes reach replicas before they count as done.
// The zero value asks nothing (no WAIT).
type Replication struct {
	// Replicas is how many replicas must acknowledge; 0: no WAIT.
	Replicas int
	// Timeout bounds each WAIT. Zero → 1s.
	Timeout time.Duration
	// OnShort, when set, makes a WAIT that ends short of Replicas
	// best-effort: OnShort gets the *ReplicationError and the calls keep
	// their replies (the worker, whose outcome is on the master, goes on
	// rather than stall on a dead replica). When nil, every call of that
	// master fails with the *ReplicationError (an enqueue is then refused:
	// never a silent success).
	OnShort func(error)
}

// On reports whether r asks for a WAIT.
func (r Replication) On() bool { return r.Replicas > 0 }

func (r Replication) timeout() time.Duration {
	if r.Timeout <= 0 {
		return time.Second
	}
	return r.Timeout
}

// PipelinedReplicated runs calls like Pipelined and, when r is On, makes
// each master that took one WAIT for r.Replicas replicas (see the top of
// this file). A call whose write could not be confirmed on enough
// replicas fails with a *ReplicationError (unless r.OnShort is set); a
// WAIT that got no answer fails the calls it was to confirm with its
// error.
func PipelinedReplicated(ctx context.Context, rdb redis.UniversalClient, calls []Call, r Replication) []Result {
	if !r.On() || len(calls) == 0 {
		return Pipelined(ctx, rdb, calls)
	}
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		return clusterReplicated(ctx, cc, calls, r)
	}
	addr := ""
	if c, ok := rdb.(*redis.Client); ok {
		addr = c.Options().Addr
	}
	return nodeReplicated(ctx, rdb, addr, calls, r)
}

// Replicated returns a Runner that runs each call with PipelinedReplicated.
func Replicated(rdb redis.UniversalClient, r Replication) Runner { return replicated{rdb, r} }

type replicated struct {
	rdb redis.UniversalClient
	r   Replication
}

func (d replicated) Run(ctx context.Context, s *redis.Script, keys []string, args ...any) (any, error) {
	res := PipelinedReplicated(ctx, d.rdb, []Call{{Script: s, Keys: keys, Args: args}}, d.r)
	return res[0].Val, res[0].Err
}

// send adds call to pipe.
func send(ctx context.Context, pipe redis.Pipeliner, c Call) *redis.Cmd {
	if c.Script == nil {
		return pipe.Do(ctx, c.Cmd...)
	}
	return c.Script.EvalSha(ctx, pipe, c.Keys, c.Args...)
}

// nodeReplicated runs calls and a WAIT in one pipeline on c, which must be
// one server (a *redis.Client, a Sentinel failover client, or a Cluster
// node's client). Scripts the server did not know (NOSCRIPT: not run) are
// loaded and sent again with a second WAIT.
func nodeReplicated(ctx context.Context, c redis.UniversalClient, addr string, calls []Call, r Replication) []Result {
	out := make([]Result, len(calls))
	todo := make([]int, len(calls))
	for i := range calls {
		todo[i] = i
	}
	for round := 0; round < 2 && len(todo) > 0; round++ {
		cmds := make([]*redis.Cmd, len(todo))
		var wait *redis.IntCmd
		_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for k, i := range todo {
				cmds[k] = send(ctx, p, calls[i])
			}
			wait = redis.NewIntCmd(ctx, "wait", r.Replicas, r.timeout().Milliseconds())
			_ = p.Process(ctx, wait)
			return nil
		}) // errors are per command
		var again, written []int
		for k, i := range todo {
			out[i].Val, out[i].Err = cmds[k].Result()
			switch {
			case out[i].Err == nil || errors.Is(out[i].Err, redis.Nil):
				written = append(written, i)
			case round == 0 && calls[i].Script != nil && redis.HasErrorPrefix(out[i].Err, "NOSCRIPT"):
				again = append(again, i)
			}
		}
		confirm(out, written, wait, addr, r)
		for _, i := range again {
			if err := calls[i].Script.Load(ctx, c).Err(); err != nil {
				out[i].Err = err
			}
		}
		todo = again
	}
	return out
}

// confirm applies the WAIT's answer to the calls that wrote.
func confirm(out []Result, written []int, wait *redis.IntCmd, addr string, r Replication) {
	if len(written) == 0 {
		return
	}
	n, err := wait.Result()
	if err == nil && int(n) >= r.Replicas {
		return
	}
	if err == nil {
		err = &ReplicationError{Addr: addr, Want: r.Replicas, Got: int(n), Timeout: r.timeout()}
		if r.OnShort != nil {
			r.OnShort(err)
			return
		}
	} else {
		err = fmt.Errorf("redis: WAIT for replicas: %w", err)
	}
	for _, i := range written {
		out[i].Err = err
	}
}

// clusterTries bounds how often a group refused by its master (the slot
// moved, or the cluster is failing over) is sent again.
const clusterTries = 6

// clusterReplicated groups calls by the master of their first key and runs
// each group with nodeReplicated on that master, the groups in parallel.
func clusterReplicated(ctx context.Context, cc *redis.ClusterClient, calls []Call, r Replication) []Result {
	out := make([]Result, len(calls))
	todo := make([]int, len(calls))
	for i := range calls {
		todo[i] = i
	}
	backoff := 50 * time.Millisecond
	for try := 1; ; try++ {
		groups := map[*redis.Client][]int{}
		for _, i := range todo {
			node, err := cc.MasterForKey(ctx, callKey(calls[i]))
			if err != nil {
				out[i].Err = err
				continue
			}
			groups[node] = append(groups[node], i)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		var retry []int
		for node, idx := range groups {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sub := make([]Call, len(idx))
				for k, i := range idx {
					sub[k] = calls[i]
				}
				res := nodeReplicated(ctx, node, node.Options().Addr, sub, r)
				mu.Lock()
				defer mu.Unlock()
				for k, i := range idx {
					out[i] = res[k]
					if refused(res[k].Err) {
						retry = append(retry, i)
					}
				}
			}()
		}
		wg.Wait()
		if len(retry) == 0 || try == clusterTries || ctx.Err() != nil {
			return out
		}
		cc.ReloadState(ctx)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return out
		case <-t.C:
		}
		backoff = min(2*backoff, time.Second)
		todo = retry
	}
}

// callKey is the key a call is routed by: its first key.
func callKey(c Call) string {
	if c.Script != nil {
		if len(c.Keys) > 0 {
			return c.Keys[0]
		}
		return ""
	}
	if len(c.Cmd) > 1 {
		return fmt.Sprint(c.Cmd[1])
	}
	return ""
}

// refused reports whether err is a master's refusal that wrote nothing and
// that another try, once the slot map is reloaded, may get past.
func refused(err error) bool {
	var rerr redis.Error
	if err == nil || !errors.As(err, &rerr) {
		return false
	}
	msg := strings.TrimPrefix(rerr.Error(), "ERR ")
	for _, code := range []string{"MOVED", "ASK", "CLUSTERDOWN", "TRYAGAIN", "READONLY", "LOADING", "MASTERDOWN"} {
		if strings.HasPrefix(msg, code+" ") {
			return true
		}
	}
	return false
}
