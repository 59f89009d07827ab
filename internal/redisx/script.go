package redisx

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Runner runs a Redis script and returns its reply, like
// (*redis.Script).Run. Direct runs each call in its own round trip; a
// Batcher shares round trips between concurrent calls.
type Runner interface {
	Run(ctx context.Context, s *redis.Script, keys []string, args ...any) (any, error)
}

// Direct returns a Runner that runs each call in its own round trip on rdb
// (EVALSHA, EVAL when the script is not cached).
func Direct(rdb redis.Scripter) Runner { return direct{rdb} }

type direct struct{ rdb redis.Scripter }

func (d direct) Run(ctx context.Context, s *redis.Script, keys []string, args ...any) (any, error) {
	return s.Run(ctx, d.rdb, keys, args...).Result()
}

// Call is one call of a pipeline: a script with its keys and arguments,
// or, when Script is nil, the plain command Cmd (for example
// []any{"sadd", key, member}).
type Call struct {
	Script *redis.Script
	Keys   []string
	Args   []any
	Cmd    []any
}

// Result is the reply of one Call.
type Result struct {
	Val any
	Err error
}

// Pipelined runs calls in one pipelined round trip of EVALSHAs and returns
// each call's reply, in order. Calls answered NOSCRIPT (the server
// restarted or its script cache was flushed: the call did not run) are run
// again with Script.Run, which loads the script. One call is one plain
// round trip. The calls need not share a hash slot: on a cluster go-redis
// sends each to its node.
func Pipelined(ctx context.Context, rdb redis.UniversalClient, calls []Call) []Result {
	out := make([]Result, len(calls))
	if len(calls) == 1 && calls[0].Script != nil {
		c := calls[0]
		out[0].Val, out[0].Err = c.Script.Run(ctx, rdb, c.Keys, c.Args...).Result()
		return out
	}
	cmds := make([]*redis.Cmd, len(calls))
	_, _ = rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for i, c := range calls {
			if c.Script == nil {
				cmds[i] = pipe.Do(ctx, c.Cmd...)
			} else {
				cmds[i] = c.Script.EvalSha(ctx, pipe, c.Keys, c.Args...)
			}
		}
		return nil
	}) // errors are per command too
	for i, c := range calls {
		out[i].Val, out[i].Err = cmds[i].Result()
		if c.Script != nil && out[i].Err != nil && redis.HasErrorPrefix(out[i].Err, "NOSCRIPT") {
			out[i].Val, out[i].Err = c.Script.Run(ctx, rdb, c.Keys, c.Args...).Result()
		}
	}
	return out
}

// Reply is a script's array reply, read by position with Int and Str.
type Reply []any

// ParseReply checks that res is an array of at least n elements.
func ParseReply(res any, n int) (Reply, error) {
	arr, ok := res.([]any)
	if !ok || len(arr) < n {
		return nil, fmt.Errorf("unexpected script reply %v (want an array of %d)", res, n)
	}
	return Reply(arr), nil
}

// Int is element i as an integer (0 when it is neither an integer nor a
// number in a string).
func (r Reply) Int(i int) int64 {
	switch v := r[i].(type) {
	case int64:
		return v
	case string:
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	return 0
}

// Str is element i as a string (an integer in decimal; "" for anything
// else).
func (r Reply) Str(i int) string {
	switch v := r[i].(type) {
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	}
	return ""
}
