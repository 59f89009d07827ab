package unmatched_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/internal/unmatched"
)

// eachBackend runs f on miniredis and on a real redis-server.
func eachBackend(t *testing.T, f func(t *testing.T, rdb redis.UniversalClient, s *unmatched.Store)) {
	t.Parallel()
	for _, b := range redistest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			rdb, _ := b.New(t)
			f(t, rdb, unmatched.NewStore(rdb))
		})
	}
}

// TestAddList: entries come back newest first with every field, the
// stream entry has the documented fields, and the error is cut to
// MaxError bytes at a character.
func TestAddList(t *testing.T) {
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, s *unmatched.Store) {
		ctx := context.Background()
		now := time.Now().UTC().Truncate(time.Millisecond)
		long := strings.Repeat("é", unmatched.MaxError) // 2 bytes a character
		first := unmatched.Entry{At: now.Add(-time.Second), TaskID: "t1", Agent: "llm", Attempt: 2, ErrorClass: "provider_error",
			ClassifiedBy: "default", Status: 0, Error: "the tool said something odd"}
		second := unmatched.Entry{At: now, TaskID: "t2", Agent: "tool", Attempt: 1, ErrorClass: "provider_error",
			ClassifiedBy: "model", Status: 500, Error: "x" + long}
		require.NoError(t, s.Add(ctx, first))
		require.NoError(t, s.Add(ctx, second))

		got, err := s.List(ctx, unmatched.Query{})
		require.NoError(t, err)
		require.Len(t, got, 2)
		require.Equal(t, first, got[1])
		require.Equal(t, "t2", got[0].TaskID, "newest first")
		require.Equal(t, 500, got[0].Status)
		require.Equal(t, "model", got[0].ClassifiedBy)
		require.Len(t, got[0].Error, unmatched.MaxError-1, "cut at a character: 'x' and 1023 é")
		require.True(t, strings.HasPrefix(second.Error, got[0].Error))

		msgs, err := rdb.XRange(ctx, rkeys.ClassifyUnmatched(), "-", "+").Result()
		require.NoError(t, err)
		require.Len(t, msgs, 2)
		require.Equal(t, map[string]any{"at": fmt.Sprint(first.At.UnixMilli()), "task": "t1", "agent": "llm", "attempt": "2",
			"class": "provider_error", "classified_by": "default", "status": "0", "error": first.Error}, msgs[0].Values)
	})
}

// TestListFilters: --agent, --limit and --since select as documented,
// across pages of the stream.
func TestListFilters(t *testing.T) {
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, s *unmatched.Store) {
		ctx := context.Background()
		now := time.Now().UTC().Truncate(time.Millisecond)
		const n = 1200 // more than a page
		for i := range n {
			agent := "a"
			if i%3 == 0 {
				agent = "b"
			}
			require.NoError(t, s.Add(ctx, unmatched.Entry{At: now, TaskID: fmt.Sprint("t", i), Agent: agent, Attempt: 1,
				ErrorClass: "provider_error", ClassifiedBy: "default"}))
		}
		all, err := s.List(ctx, unmatched.Query{})
		require.NoError(t, err)
		require.Len(t, all, n)
		require.Equal(t, fmt.Sprint("t", n-1), all[0].TaskID)
		require.Equal(t, "t0", all[n-1].TaskID)

		bs, err := s.List(ctx, unmatched.Query{Agent: "b"})
		require.NoError(t, err)
		require.Len(t, bs, n/3)
		for _, e := range bs {
			require.Equal(t, "b", e.Agent)
		}
		limited, err := s.List(ctx, unmatched.Query{Agent: "b", Limit: 7})
		require.NoError(t, err)
		require.Equal(t, bs[:7], limited)
		limited, err = s.List(ctx, unmatched.Query{Limit: 3})
		require.NoError(t, err)
		require.Equal(t, all[:3], limited)

		none, err := s.List(ctx, unmatched.Query{Since: time.Now().Add(time.Hour)})
		require.NoError(t, err)
		require.Empty(t, none, "nothing since a time to come")
		recent, err := s.List(ctx, unmatched.Query{Since: now.Add(-time.Hour)})
		require.NoError(t, err)
		require.Len(t, recent, n)
	})
}

// TestListEmpty: no stream lists nothing (an empty list, not nil).
func TestListEmpty(t *testing.T) {
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, s *unmatched.Store) {
		got, err := s.List(context.Background(), unmatched.Query{Agent: "x", Limit: 5})
		require.NoError(t, err)
		require.NotNil(t, got)
		require.Empty(t, got)
	})
}

// TestAddTrims: the stream stays near MaxLen (XADD MAXLEN ~), on a real
// redis-server (miniredis trims exactly).
func TestAddTrims(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	s := unmatched.NewStore(rdb)
	pipe := rdb.Pipeline()
	for i := range unmatched.MaxLen + 500 {
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: rkeys.ClassifyUnmatched(), Values: []any{"task", i}})
	}
	_, err := pipe.Exec(ctx)
	require.NoError(t, err)
	require.NoError(t, s.Add(ctx, unmatched.Entry{At: time.Now(), TaskID: "last"}))
	n, err := rdb.XLen(ctx, rkeys.ClassifyUnmatched()).Result()
	require.NoError(t, err)
	require.Less(t, n, int64(unmatched.MaxLen+500), "trimmed")
	require.GreaterOrEqual(t, n, int64(unmatched.MaxLen), "about MaxLen kept")
}

// TestCut: Cut keeps at most n bytes and never splits a character.
func TestCut(t *testing.T) {
	t.Parallel()
	require.Equal(t, "abc", unmatched.Cut("abc", 5))
	require.Equal(t, "ab", unmatched.Cut("abc", 2))
	require.Equal(t, "a", unmatched.Cut("aé", 2))
	require.Equal(t, "aé", unmatched.Cut("aé", 3))
}
