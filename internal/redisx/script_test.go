package redisx_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/redisx"
)

// TestPipelinedReloadsScripts: calls the server does not know (its script
// cache was flushed, as after a restart) are run again with EVAL, in order,
// once each; a script's own error stays that call's.
func TestPipelinedReloadsScripts(t *testing.T) {
	t.Parallel()
	for _, b := range redistest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			rdb, _ := b.New(t)
			ctx := context.Background()
			add := redis.NewScript(`return redis.call('INCRBY', KEYS[1], ARGV[1])`)
			bad := redis.NewScript(`return redis.error_reply('NOPE not today')`)
			require.NoError(t, add.Load(ctx, rdb).Err())
			require.NoError(t, rdb.ScriptFlush(ctx).Err())
			rs := redisx.Pipelined(ctx, rdb, []redisx.Call{
				{Script: add, Keys: []string{"a"}, Args: []any{2}},
				{Script: bad},
				{Script: add, Keys: []string{"a"}, Args: []any{3}},
			})
			require.Len(t, rs, 3)
			require.NoError(t, rs[0].Err)
			require.EqualValues(t, 2, rs[0].Val)
			require.ErrorContains(t, rs[1].Err, "NOPE not today")
			require.NoError(t, rs[2].Err)
			require.EqualValues(t, 5, rs[2].Val, "each call ran once")
			v, err := redisx.Direct(rdb).Run(ctx, add, []string{"a"}, 1)
			require.NoError(t, err)
			require.EqualValues(t, 6, v)
		})
	}
}

// TestReply reads a script's array reply by position.
func TestReply(t *testing.T) {
	t.Parallel()
	_, err := redisx.ParseReply(int64(1), 1)
	require.Error(t, err)
	_, err = redisx.ParseReply([]any{int64(1)}, 2)
	require.Error(t, err)
	r, err := redisx.ParseReply([]any{int64(7), "x", "12", nil}, 4)
	require.NoError(t, err)
	require.EqualValues(t, 7, r.Int(0))
	require.Equal(t, "x", r.Str(1))
	require.EqualValues(t, 12, r.Int(2))
	require.EqualValues(t, 0, r.Int(3))
	require.Equal(t, "", r.Str(3))
	require.Equal(t, "7", r.Str(0))
}

// TestPipelinedPlainCommands: plain commands ride in the same round trip
// as scripts.
func TestPipelinedPlainCommands(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	get := redis.NewScript(`return redis.call('SCARD', KEYS[1])`)
	rs := redisx.Pipelined(ctx, rdb, []redisx.Call{{Cmd: []any{"sadd", "s", "x"}}, {Script: get, Keys: []string{"s"}}})
	require.NoError(t, rs[0].Err)
	require.EqualValues(t, 1, rs[0].Val)
	require.NoError(t, rs[1].Err)
	require.EqualValues(t, 1, rs[1].Val)
}
