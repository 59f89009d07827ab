package broker

// doneScript is asynq's done and the release of the run's tenant count,
// run in place of asynq's done (lua/done.lua documents its KEYS, ARGV and
// reply: asynq's five keys, then ReleaseKeys; asynq's three arguments).
var doneScript = scripts.Script("lib/wake.lua", "lib/release.lua", "asynq/done.lua", "done.lua")

// DoneLua defines, for a script that acknowledges a delivery as asynq's
// done does and releases its run's tenant count (internal/record's
// apply_acked, which keeps its own script: the record's write and the ack
// in one), agentq_counted and agentq_release_wake (lua/lib/release.lua,
// keys: ReleaseKeys) and asynq_done(KEYS, ARGV): asynq's done verbatim, as
// a function of asynq's five keys and three arguments.
var DoneLua = scripts.Source("lib/wake.lua", "lib/release.lua", "asynq/done.lua")

// doneOf returns the task ID of a call of asynq's done script.
func doneOf(sha string, keys []string, args []any) (string, bool) {
	if sha != doneSHA || len(keys) != 5 || len(args) != 3 {
		return "", false
	}
	id, ok := args[0].(string)
	return id, ok
}
