package broker

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/rkeys"
)

// ReleaseLua defines agentq_counted(task), the tenant the dequeue counted
// the run of task hash task for (nil: none; read before asynq's script
// deletes the hash), and agentq_release_wake(t, inflight, capped, ready,
// wake): fairReleaseLua's agentq_release, and a wake token on the
// queue's wake list when it moved t back to the ready set. The scripts
// that take a run out of asynq's active list include it (asynq's done,
// retry and requeue as AsynqClient runs them; internal/record's
// apply_acked).
var ReleaseLua = pushLua + fairReleaseLua + fmt.Sprintf(`
local function agentq_counted(task)
  return redis.call("HGET", task, "`+FieldCounted+`")
end
local function agentq_release_wake(t, inflight, capped, ready, wake)
  if agentq_release(t, inflight, capped, ready) == 1 then agentq_wake(wake, 1, %d) end
end
`, WakeCap)

// ReleaseKeys are the keys agentq_release_wake takes for queue.
func ReleaseKeys(queue string) []string {
	return append(fairReleaseKeys(queue), rkeys.Wake(queue))
}

// wrap runs asynq's script src (as a function of KEYS and ARGV) for the
// run whose task hash is taskKey (a Lua expression), and releases the
// run's count when it succeeded; the release's keys are the last four.
func wrap(name, src, taskKey string, hdel bool) string {
	drop := ""
	if hdel {
		drop = `if t then redis.call("HDEL", ` + taskKey + `, "` + FieldCounted + `") end`
	}
	return ReleaseLua + "local function " + name + "(KEYS, ARGV)" + src + "\nend\n" +
		"local t = agentq_counted(" + taskKey + ")\n" +
		"local r = " + name + "(KEYS, ARGV)\n" +
		"if type(r) == \"table\" and r.err then return r end\n" + drop + "\n" +
		"local n = #KEYS\n" +
		"agentq_release_wake(t, KEYS[n - 3], KEYS[n - 2], KEYS[n - 1], KEYS[n])\n" +
		"return r\n"
}

// fairDequeueScript is DequeueLua (its KEYS and ARGV are asynq's
// dequeue's followed by DequeueKeys and Config.DequeueArgs).
var fairDequeueScript = redis.NewScript(DequeueLua)

// doneScript is asynq's done (asynqDoneSource) and the release of
// the run's count. KEYS: asynq's five, then ReleaseKeys. ARGV: asynq's.
var doneScript = redis.NewScript(wrap("asynq_done", asynqDoneSource, "KEYS[3]", false))

// retryScript is asynq's retry (asynqRetrySource) and the release
// of the run's count. KEYS: asynq's eight, then ReleaseKeys. ARGV:
// asynq's. The run's lane stays in its task hash, for its forward.
var retryScript = redis.NewScript(wrap("asynq_retry", asynqRetrySource, "KEYS[1]", true))

// requeueScript is asynq's requeue (asynqRequeueSource) of a
// shutting-down server's run, which goes back to the front of its lane
// (asynq's pending list for the default lane), the release of its count,
// and a wake token so that another worker takes it at once. KEYS: asynq's
// four (active, lease, pending, task hash), then the ready set, the tenant
// registry, and ReleaseKeys. ARGV: asynq's one (the ID), then the lane
// prefix.
var requeueScript = redis.NewScript(LaneLua + wrap("asynq_requeue", requeueBody(), "KEYS[4]", true))

func requeueBody() string {
	const push = `redis.call("RPUSH", KEYS[3], ARGV[1])`
	if strings.Count(asynqRequeueSource, push) != 1 {
		panic("broker: asynq's requeue script no longer has " + push)
	}
	return strings.Replace(asynqRequeueSource, push,
		`agentq_lane_push(KEYS[3], ARGV[2], KEYS[5], KEYS[6], KEYS[4], ARGV[1], true)
agentq_wake(KEYS[#KEYS], 1, `+fmt.Sprint(WakeCap)+`)`, 1)
}

// fairCall runs script, the fair version of one of asynq's, with asynq's
// keys and arguments followed by extraKeys and extraArgs.
func (c *AsynqClient) fairCall(ctx context.Context, script *redis.Script, keys []string, args []any, extraKeys []string, extraArgs ...any) *redis.Cmd {
	ks := append(append(make([]string, 0, len(keys)+len(extraKeys)), keys...), extraKeys...)
	as := append(append(make([]any, 0, len(args)+len(extraArgs)), args...), extraArgs...)
	return script.Run(ctx, c.UniversalClient, ks, as...)
}

// DoneLua defines, for a script that acknowledges a delivery as asynq's
// done does and releases its run's tenant count (internal/record's
// apply_acked), ReleaseLua's functions and asynq_done(KEYS, ARGV): asynq's
// done script verbatim, as a function whose KEYS and ARGV are asynq's five
// keys and three arguments.
var DoneLua = ReleaseLua + "local function asynq_done(KEYS, ARGV)" + asynqDoneSource + "end\n"
