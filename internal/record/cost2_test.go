package record

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
)

func TestPreludeCost(t *testing.T) {
	if os.Getenv("RECORD_COST") == "" {
		t.Skip()
	}
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	for _, tc := range []struct{ name, src string }{
		{"empty", "return 1"},
		{"prelude", render(prelude + "return 1")},
		{"consts", render(renderConsts() + "return 1")},
	} {
		s := redis.NewScript(tc.src)
		require.NoError(t, rdb.ConfigResetStat(ctx).Err())
		for range 20000 {
			require.NoError(t, s.Run(ctx, rdb, []string{"k"}).Err())
		}
		info, _ := rdb.Info(ctx, "commandstats").Result()
		for _, l := range strings.Split(info, "\n") {
			if strings.Contains(l, "evalsha") {
				t.Log(tc.name, l)
			}
		}
	}
}
