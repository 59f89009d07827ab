package broker

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestForwardIsAsynqsPatched: lua/forward.lua is asynq's forward but for
// its LPUSH (the run goes to its lane) and its reply (wake tokens, and
// when the next task is due). When asynq changes its forward, this fails:
// patch the new one the same way.
func TestForwardIsAsynqsPatched(t *testing.T) {
	t.Parallel()
	const push, reply = `redis.call("LPUSH", KEYS[2], id)`, "return table.getn(ids)"
	src := asynqForwardSource
	require.Equal(t, 1, strings.Count(src, push), "asynq's forward no longer has %s", push)
	require.True(t, strings.HasSuffix(src, reply), "asynq's forward no longer ends with %s", reply)
	src = strings.Replace(src, push, `agentq_lane_push(KEYS[2], ARGV[6], KEYS[4], KEYS[5], taskKey, id, false)`, 1)
	src = strings.Replace(src, reply, `local n = table.getn(ids)
if n > 0 then agentq_wake(KEYS[3], n, tonumber(ARGV[5])) end
local first = redis.call("ZRANGE", KEYS[1], 0, 0, "WITHSCORES")
return {n, first[2] or "-1"}`, 1)
	require.Equal(t, strings.TrimSpace(src), strings.TrimSpace(luaBody(t, "forward.lua")))
}

// TestRequeueIsAsynqsPatched: lua/requeue.lua's asynq_requeue is asynq's
// requeue but for its RPUSH (the run goes back to the front of its lane,
// with a wake token).
func TestRequeueIsAsynqsPatched(t *testing.T) {
	t.Parallel()
	const push = `redis.call("RPUSH", KEYS[3], ARGV[1])`
	src := asynqRequeueSource
	require.Equal(t, 1, strings.Count(src, push), "asynq's requeue no longer has %s", push)
	src = strings.Replace(src, push, `agentq_lane_push(KEYS[3], ARGV[2], KEYS[5], KEYS[6], KEYS[4], ARGV[1], true)
agentq_wake(KEYS[#KEYS], 1, C.wake_cap)`, 1)
	require.Contains(t, luaBody(t, "requeue.lua"), "local function asynq_requeue(KEYS, ARGV)"+src+"\nend\n")
}

// TestAsynqSourcesVerbatim: the scripts AsynqClient recognises are the
// bytes of lua/asynq/, not a rendering of them.
func TestAsynqSourcesVerbatim(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"enqueue", "schedule", "dequeue", "forward", "retry", "requeue", "done"} {
		src := asynqSource(name)
		require.True(t, strings.HasPrefix(src, "\n"), name)
		require.Contains(t, luaBody(t, "asynq/"+name+".lua"), "local function asynq_"+name+"(KEYS, ARGV)"+src+"\nend\n")
	}
}

// luaBody is lua/name without its leading comment lines.
func luaBody(t *testing.T, name string) string {
	b, err := fs.ReadFile(luaFiles, "lua/"+name)
	require.NoError(t, err)
	lines := strings.SplitAfter(string(b), "\n")
	for len(lines) > 0 && strings.HasPrefix(lines[0], "--") {
		lines = lines[1:]
	}
	return strings.Join(lines, "")
}
