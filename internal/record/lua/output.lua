-- output.lua: appends live output events of a task's agents (Store.Output)
-- to its output list, numbered from the record's sequence like its history
-- events, and announces each (rec_event's channel), within the task's caps.
-- KEYS[1] task record, KEYS[2] output list
-- ARGV[1] the delivery's run, ARGV[2] the most events a task keeps,
-- ARGV[3] the most bytes, ARGV[4] the truncation marker's JSON (without
-- seq), ARGV[5..] the events' JSON (without seq)
-- Returns {R.applied, kept} (kept: how many were kept; the rest went over
-- the caps: one marker says so, once), or, writing nothing, {R.canceled},
-- {R.stale}, {R.ended} or {R.missing} (no record).
local cur = redis.call("HMGET", KEYS[1], F.run, F.state, F.seq, F.out_n, F.out_bytes, F.watch)
if not cur[2] then return {R.missing} end
if cur[2] == S.canceled then return {R.canceled} end
local run, d = tonumber(cur[1] or "0"), tonumber(ARGV[1])
if run > d then return {R.stale} end
if run == d and TERMINAL(cur[2]) then return {R.ended} end
local seq, n, bytes = tonumber(cur[3]) or 0, tonumber(cur[4]) or 0, tonumber(cur[5]) or 0
local maxn, maxb = tonumber(ARGV[2]), tonumber(ARGV[3])
local kept = 0
for i = 5, #ARGV do
  if n >= maxn or bytes + #ARGV[i] > maxb then
    if n <= maxn then
      seq = seq + 1
      n = maxn + 1
      local ev = rec_seq(ARGV[4], seq)
      redis.call("RPUSH", KEYS[2], ev)
      rec_announce(KEYS[1], cur[6], ev)
    end
    break
  end
  seq, n, bytes, kept = seq + 1, n + 1, bytes + #ARGV[i], kept + 1
  local ev = rec_seq(ARGV[i], seq)
  redis.call("RPUSH", KEYS[2], ev)
  rec_announce(KEYS[1], cur[6], ev)
end
redis.call("HSET", KEYS[1], F.seq, seq, F.out_n, n, F.out_bytes, bytes)
local ttl = redis.call("TTL", KEYS[1])
if ttl > 0 then redis.call("EXPIRE", KEYS[2], ttl) end
return {R.applied, kept}
