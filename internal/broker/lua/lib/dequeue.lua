-- lib/dequeue.lua: defines agentq_dequeue(KEYS, ARGV), the fair dequeue of
-- one queue: dequeue.lua runs it in place of asynq's dequeue, done_next.lua
-- and internal/record's apply_acked after a done (complete-and-fetch-next:
-- prefetch.go). Its KEYS and ARGV are dequeue.lua's (the parameters shadow
-- the script's). Returns the run's message and its task ID, or nil.
--
-- With no tenant in the ready set and no default cap this is asynq's
-- dequeue of the pending list (its EXISTS names the ready set too). Otherwise it takes the
-- tenant with the lowest pass (the default tenant's runs in the pending
-- list take part at max(their pass, the lowest)); a tenant at its cap
-- moves to the capped set and the next is tried; the tenant's high lane
-- is served first, then normal, then low, and its pass advances by
-- its stride, 1,000,000/weight rounded (whole numbers: Redis reads and
-- writes them faster than fractions) — a tenant that joined (pass 0,
-- served at once) goes to the end of the round (the highest pass + its
-- stride). A tenant alone in the ready set, with no default runs waiting
-- in the pending list, keeps its pass (there is no one to share with; a
-- tenant that joins, or comes back from its cap, is placed against it as
-- it stands). A tenant stays in the
-- ready set when its lanes empty, and leaves it when a dispatch finds them
-- empty (one look, not one per dispatch).
--
-- What it costs is mostly redis.call itself (arguments made, the reply
-- written and read back into Lua) and number formatting (Redis 7.0
-- prints a Lua number argument, and a score it replies, with
-- snprintf("%.17g")), so: one EXISTS answers whether the queue is
-- paused, whether asynq's pending list has runs and whether the ready set
-- has tenants (EXISTS counts a key named k times k times: paused 1,
-- pending 2, ready 4), constant arguments are strings, the lowest tenant
-- is read without its score (read only when the default tenant's runs
-- compete, or the tenant is capped) together with the next one (none: it
-- is alone and its pass stays), its pass advances by ZINCRBY of the
-- stride string, whose reply tells a tenant that joined (its new pass is
-- the stride) without a read, and the run moves by RPOPLPUSH from each
-- lane in turn (a missing lane's is cheap) rather than LMPOP and LPUSH
-- (LMPOP's nested reply, built and read back into Lua, and its rewrite
-- for replication cost more than the command).
local function agentq_dequeue(KEYS, ARGV)
  local e = redis.call("EXISTS", KEYS[2], KEYS[1], KEYS[1], KEYS[5], KEYS[5], KEYS[5], KEYS[5])
  if e % 2 == 1 then return nil end
  local pend = e % 4 >= 2
  local defcap = tonumber(ARGV[5])
  local function mark(id, t)
    local key = ARGV[2] .. id
    if t then
      redis.call("HSET", key, "state", "active", F.counted, t)
      redis.call("HINCRBY", KEYS[7], t, "1")
    else
      redis.call("HSET", key, "state", "active")
    end
    redis.call("HDEL", key, "pending_since")
    redis.call("ZADD", KEYS[4], ARGV[1], id)
    return redis.call("HGET", key, "msg"), id
  end
  if defcap == 0 and e < 4 then
    if not pend then return nil end
    local id = redis.call("RPOPLPUSH", KEYS[1], KEYS[3])
    if not id then return nil end
    return mark(id, nil)
  end
  local function settings(t)
    if ARGV[6] == "1" then
      local s = redis.call("HGET", KEYS[8], t)
      if s then
        local w, c = string.match(s, "^(%S+) (%S+)$")
        if w then return string.format("%d", math.max(1, math.floor(1000000 / tonumber(w) + 0.5))), tonumber(c) end
      end
    end
    return ARGV[4], defcap
  end
  for i = 1, 64 do
    local first = {}
    if i > 1 or e >= 4 then first = redis.call("ZRANGE", KEYS[5], "0", "1") end
    local t, p = first[1], nil
    local pending = false
    if pend and t ~= "" and not redis.call("ZSCORE", KEYS[5], "") and not redis.call("ZSCORE", KEYS[6], "") then
      if t then p = tonumber(redis.call("ZSCORE", KEYS[5], t)) end
      local dp = math.max(tonumber(redis.call("HGET", KEYS[9], "p")) or 0, p or 0)
      if t == nil or dp <= p then t, p, pending = "", dp, true end
    end
    if t == nil then return nil end
    local stride, cap = settings(t)
    if cap > 0 and (tonumber(redis.call("HGET", KEYS[7], t)) or 0) >= cap then
      p = p or redis.call("ZSCORE", KEYS[5], t)
      redis.call("ZREM", KEYS[5], t)
      redis.call("ZADD", KEYS[6], p, t)
    else
      local counted = nil
      if cap > 0 then counted = t end
      local id = redis.call("RPOPLPUSH", ARGV[3] .. "h:" .. t, KEYS[3])
      if not id then
        local n = KEYS[1]
        if t ~= "" then n = ARGV[3] .. "n:" .. t end
        id = redis.call("RPOPLPUSH", n, KEYS[3]) or redis.call("RPOPLPUSH", ARGV[3] .. "l:" .. t, KEYS[3])
      end
      if not id then
        redis.call("ZREM", KEYS[5], t)
      else
        if pending then
          local np = p + tonumber(stride)
          if p == 0 then
            local last = redis.call("ZRANGE", KEYS[5], "-1", "-1", "WITHSCORES")
            np = (tonumber(last[2]) or 0) + tonumber(stride)
          end
          redis.call("HSET", KEYS[9], "p", string.format("%d", np))
        elseif (first[2] or pend) and redis.call("ZINCRBY", KEYS[5], stride, t) == stride then
          local last = redis.call("ZRANGE", KEYS[5], "-1", "-1", "WITHSCORES")
          if last[1] ~= t then redis.call("ZINCRBY", KEYS[5], last[2], t) end
        end
        return mark(id, counted)
      end
    end
  end
  return nil
end
