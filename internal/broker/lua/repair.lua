-- repair.lua: mend what only steers the fair dispatch's order, never where
-- a run is (RepairFair): the in-flight counts are recounted from asynq's
-- active list (the runs whose task hash names a counted tenant), a tenant
-- with runs in a lane that is in neither the ready nor the capped set
-- joins the ready set, a capped tenant below its cap goes back to the
-- ready set, and a tenant with nothing waiting, nothing in flight and in
-- neither set leaves the registry (agentq_lane_join registers a tenant
-- only when it joins the ready set).
-- KEYS[1] asynq's active list, KEYS[2] ready, KEYS[3] capped, KEYS[4] in
-- flight, KEYS[5] the tenant registry, KEYS[6] the tenants' settings
-- ARGV[1] asynq's task key prefix, ARGV[2] lane prefix, ARGV[3] default
-- concurrency
-- Returns {tenants made ready, in-flight counts corrected}.
local counts = {}
for _, id in ipairs(redis.call("LRANGE", KEYS[1], 0, -1)) do
  local t = redis.call("HGET", ARGV[1] .. id, F.counted)
  if t then counts[t] = (counts[t] or 0) + 1 end
end
local fixed = 0
local old = {}
local cur = redis.call("HGETALL", KEYS[4])
for i = 1, #cur, 2 do old[cur[i]] = tonumber(cur[i + 1]) end
for t, n in pairs(counts) do
  if old[t] ~= n then fixed = fixed + 1 end
  old[t] = nil
end
for _, n in pairs(old) do
  if n ~= 0 then fixed = fixed + 1 end
end
redis.call("DEL", KEYS[4])
for t, n in pairs(counts) do redis.call("HSET", KEYS[4], t, n) end
local readied = 0
local tenants = redis.call("SMEMBERS", KEYS[5])
table.insert(tenants, "")
for _, t in ipairs(tenants) do
  local waiting = redis.call("LLEN", ARGV[2] .. "h:" .. t) + redis.call("LLEN", ARGV[2] .. "l:" .. t)
  if t ~= "" then waiting = waiting + redis.call("LLEN", ARGV[2] .. "n:" .. t) end
  local capped = redis.call("ZSCORE", KEYS[3], t)
  local cap = tonumber(ARGV[3])
  local s = redis.call("HGET", KEYS[6], t)
  if s then cap = tonumber(string.match(s, " (%S+)$")) or cap end
  if capped and (cap == 0 or (counts[t] or 0) < cap) then
    redis.call("ZREM", KEYS[3], t)
    redis.call("ZADD", KEYS[2], capped, t)
    readied = readied + 1
  elseif waiting > 0 and not capped and not redis.call("ZSCORE", KEYS[2], t) then
    redis.call("ZADD", KEYS[2], 0, t)
    readied = readied + 1
  elseif waiting == 0 and t ~= "" and not counts[t] and not capped and not redis.call("ZSCORE", KEYS[2], t) then
    redis.call("SREM", KEYS[5], t)
  end
end
return {readied, fixed}
