package redisx_test

import (
	"context"
	"os"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redisx"
)

func TestScriptsRender(t *testing.T) {
	t.Parallel()
	s := redisx.NewScripts("test", os.DirFS("testdata/lua"), map[string]map[string]string{
		"F": redisx.Quoted("state"),
		"C": redisx.Literals(map[string]any{"done": int64(7)}),
	})
	src := s.Source("echo.lua")
	require.Contains(t, src, `redis.call("HSET", KEYS[1], "state", ARGV[1])`)
	require.Contains(t, src, "return 7")
	require.Contains(t, s.Source(redisx.NowMS, "echo.lua"), "now_ms")

	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	v, err := s.Script("echo.lua").Run(context.Background(), rdb, []string{"h"}, "x").Int64()
	require.NoError(t, err)
	require.Equal(t, int64(7), v)
	require.Equal(t, "x", mr.HGet("h", "state"))
}

func TestScriptsPanicOnUnknownNames(t *testing.T) {
	t.Parallel()
	s := redisx.NewScripts("test", os.DirFS("testdata/lua"), map[string]map[string]string{"F": redisx.Quoted("other"), "C": {}})
	require.PanicsWithValue(t, "test: a script names F.state, which its Go tables do not have", func() { s.Source("echo.lua") })
	require.Panics(t, func() { s.Source("missing.lua") })
	require.Panics(t, func() { redisx.NewScripts("test", os.DirFS("."), map[string]map[string]string{"FF": {}}) })
}
