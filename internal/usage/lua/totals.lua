-- totals adds one flush of a Recorder's counts to the hours they fall in,
-- bounding each hour's series, once per flush number, all or nothing.
--
--   KEYS[1]            rkeys.UsageFlushed(recorder ID): the number of the
--                      recorder's last flush applied
--   KEYS[2i], KEYS[2i+1]  rkeys.UsageHour(h), rkeys.UsageSeries(h), per hour
--   ARGV[1] the flush's number (> every earlier flush's of the recorder)
--   ARGV[2] the seconds KEYS[1] lives after this flush
--   ARGV[3] the bound N (usage.max_series)
--   ARGV[4] the ceiling of every counter (usage.MaxSum)
--   then per hour, in KEYS' order: the Unix second at which its keys
--   expire, the number m of its series, then m times: agent, tenant,
--   model and the six counters (in, out, cached, total, cost µ$, attempts)
-- Returns -1 when this flush (or a later one) was applied already (a
-- flush sent again after its reply was lost: nothing is added twice),
-- else the number of series folded into another.
--
-- Every argument, and the type of every key, is checked before anything
-- is written: a malformed flush (or a key of another type) is refused
-- with an error reply and writes nothing. A counter is
-- added in Lua and saturates at the ceiling (exact below it: the ceiling
-- is 2^53), so no write can fail part-way, as HINCRBY's overflow did.
--
-- A series new to an hour that already counts N series is counted as
-- (agent, C.other, model), which is admitted while the hour counts fewer
-- than N + N/10 series, else as (C.other, C.other, C.other): at most
-- N + N/10 + 1 series per hour.
local seq = tonumber(ARGV[1])
local done = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
if seq <= done then return -1 end
local cap = tonumber(ARGV[4])
local function int(v) return v and string.match(v, '^%d+$') and tonumber(v) end
local function typed(k, want)
  local t = redis.call('TYPE', k).ok
  return t == 'none' or t == want
end
local a = 5
for h = 2, #KEYS, 2 do
  if not typed(KEYS[h], 'hash') or not typed(KEYS[h + 1], 'set') then
    return redis.error_reply('usage totals: ' .. KEYS[h] .. ' or ' .. KEYS[h + 1] .. ' is of another type')
  end
  local m = int(ARGV[a + 1])
  if not int(ARGV[a]) or not m then return redis.error_reply('usage totals: bad hour arguments') end
  a = a + 2
  for _ = 1, m do
    if not ARGV[a + 2] then return redis.error_reply('usage totals: too few arguments') end
    for i = 3, 8 do
      local v = int(ARGV[a + i])
      if not v or v > cap then return redis.error_reply('usage totals: bad counter ' .. tostring(ARGV[a + i])) end
    end
    a = a + 9
  end
end
if a ~= #ARGV + 1 then return redis.error_reply('usage totals: extra arguments') end

local n = tonumber(ARGV[3])
local over = n + math.floor(n / 10)
local folded = 0
local sep = C.sep
local names = {'in', 'out', 'cached', 'total', 'cost', 'n'}
local function admit(set, s, lim)
  if redis.call('SISMEMBER', set, s) == 1 then return true end
  if redis.call('SCARD', set) < lim then redis.call('SADD', set, s) return true end
  return false
end
a = 5
for h = 2, #KEYS, 2 do
  local hash, set = KEYS[h], KEYS[h + 1]
  local exp = ARGV[a]
  local m = tonumber(ARGV[a + 1])
  a = a + 2
  for _ = 1, m do
    local s = ARGV[a] .. sep .. ARGV[a + 1] .. sep .. ARGV[a + 2]
    if not admit(set, s, n) then
      folded = folded + 1
      s = ARGV[a] .. sep .. C.other .. sep .. ARGV[a + 2]
      if not admit(set, s, over) then
        s = C.other .. sep .. C.other .. sep .. C.other
        redis.call('SADD', set, s)
      end
    end
    local fields = {}
    for i = 1, 6 do fields[i] = s .. sep .. names[i] end
    local cur = redis.call('HMGET', hash, unpack(fields))
    local set_ = {}
    for i = 1, 6 do
      local v = ARGV[a + 2 + i]
      if v ~= '0' then
        local sum = math.min((tonumber(cur[i] or '0') or 0) + tonumber(v), cap)
        set_[#set_ + 1] = fields[i]
        set_[#set_ + 1] = string.format('%.0f', sum)
      end
    end
    if #set_ > 0 then redis.call('HSET', hash, unpack(set_)) end
    a = a + 9
  end
  redis.call('EXPIREAT', hash, exp)
  redis.call('EXPIREAT', set, exp)
end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
return folded
