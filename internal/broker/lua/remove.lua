-- remove.lua: take a pending run out of its lane and delete its task hash
-- (a canceled or expired task's run that no worker has taken;
-- RemoveFromLane).
-- KEYS[1] the run's task hash
-- ARGV[1] run ID, ARGV[2] lane prefix
-- Returns 1 when removed, 0 when the run is not waiting in a lane (the
-- default lane's runs are asynq's: its inspector deletes them).
local f = redis.call("HMGET", KEYS[1], "state", F.tenant, F.priority)
if f[1] ~= "pending" or (not f[2] and not f[3]) then return 0 end
if redis.call("LREM", ARGV[2] .. (f[3] or "n") .. ":" .. (f[2] or ""), 0, ARGV[1]) == 0 then return 0 end
redis.call("DEL", KEYS[1])
return 1
