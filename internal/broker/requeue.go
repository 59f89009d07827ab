package broker

// requeueScript is asynq's requeue of a shutting-down server's run,
// patched and run in its place (lua/requeue.lua): the run goes back to
// the front of its lane (asynq's pending list for the default lane), its
// tenant count is released, and a wake token lets another worker take it
// at once. KEYS: asynq's four (active, lease, pending, task hash), then
// the ready set, the tenant registry, and ReleaseKeys. ARGV: asynq's one
// (the ID), then the lane prefix.
var requeueScript = scripts.Script("lib/wake.lua", "lib/lane.lua", "lib/release.lua", "requeue.lua")
