package broker

// retryScript is asynq's retry and the release of the run's tenant count,
// run in place of asynq's retry (lua/retry.lua: asynq's eight keys, then
// ReleaseKeys; asynq's six arguments). The run's lane stays in its task
// hash, for its forward.
var retryScript = scripts.Script("lib/wake.lua", "lib/release.lua", "asynq/retry.lua", "retry.lua")
