-- heartbeat.lua: writes a worker's registry entry (Heartbeat.Beat) and
-- drops, up to a bound, the entries whose last heartbeat is older than the
-- keep time and the oldest beyond the cap; both keys expire the keep time
-- after the last heartbeat of any worker.
-- KEYS[1] rkeys.Workers (hash: worker ID -> entry JSON); KEYS[2]
-- rkeys.WorkersBeats (zset: worker ID -> last heartbeat ms)
-- ARGV[1] the worker's ID; ARGV[2] its entry JSON; ARGV[3] now ms;
-- ARGV[4] the keep time ms; ARGV[5] the most entries; ARGV[6] the most
-- entries one heartbeat drops
-- Returns the number of entries dropped.
local now, keep = tonumber(ARGV[3]), tonumber(ARGV[4])
local cap, most = tonumber(ARGV[5]), tonumber(ARGV[6])
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], now, ARGV[1])
local drop = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. (now - keep), 'LIMIT', 0, most)
local over = redis.call('ZCARD', KEYS[2]) - #drop - cap
if over > 0 then
  local oldest = redis.call('ZRANGE', KEYS[2], #drop, #drop + math.min(over, most) - 1)
  for _, id in ipairs(oldest) do drop[#drop + 1] = id end
end
for _, id in ipairs(drop) do
  redis.call('HDEL', KEYS[1], id)
  redis.call('ZREM', KEYS[2], id)
end
redis.call('PEXPIRE', KEYS[1], keep)
redis.call('PEXPIRE', KEYS[2], keep)
return #drop
