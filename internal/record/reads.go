package record

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/redisx"
	"github.com/agentq/agentq/internal/rkeys"
)

// The reads a waiter makes as it arrives (Exists, Watch, StateSeq,
// EventsFrom) go through the store's runner when it shares pipelines
// (redisx.Batcher, as the notifier's store does): a burst of 10,000
// arrivals then costs a few pipelined round trips on one pooled
// connection at a time, and the arrivals queue in the process, not on
// go-redis's pool, whose wait is bounded (PoolTimeout) and would fail them.

// callsRunner is a Runner that also sends plain commands in shared
// pipelines (redisx.Batcher).
type callsRunner interface {
	RunCalls(ctx context.Context, calls []redisx.Call) ([]redisx.Result, error)
}

// pipeline sends calls in one round trip: through the runner's shared
// pipelines when it has them, else in a pipeline of their own.
func (s *Store) pipeline(ctx context.Context, calls []redisx.Call) ([]redisx.Result, error) {
	if b, ok := s.runner.(callsRunner); ok {
		return b.RunCalls(ctx, calls)
	}
	return redisx.Pipelined(ctx, s.rdb, calls), nil
}

// firstErr is the first error of res other than redis.Nil (a missing key
// or field, which the caller reads as empty).
func firstErr(res []redisx.Result) error {
	for _, r := range res {
		if r.Err != nil && !errors.Is(r.Err, redis.Nil) {
			return r.Err
		}
	}
	return nil
}

// strs is a plain command's array reply as strings.
func strs(v any) []string {
	arr, _ := v.([]any)
	out := make([]string, 0, len(arr))
	for _, x := range arr {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// StateSeq reads task id's state and sequence number in one round trip
// (state "" when it has no record).
func (s *Store) StateSeq(ctx context.Context, id string) (State, int64, error) {
	res, err := s.pipeline(ctx, []redisx.Call{{Cmd: []any{"hmget", rkeys.Task(id), FieldState, FieldSeq}}})
	if err == nil {
		err = firstErr(res)
	}
	if err != nil {
		return "", 0, fmt.Errorf("record: state of %s: %w", id, err)
	}
	vals, _ := res[0].Val.([]any)
	if len(vals) < 2 {
		return "", 0, fmt.Errorf("record: state of %s: unexpected reply %v", id, res[0].Val)
	}
	state, _ := vals[0].(string)
	seq, _ := vals[1].(string)
	return State(state), ParseSeq(seq), nil
}
