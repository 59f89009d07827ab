-- list reads one page of an index, newest first, with the bodies.
--
-- KEYS[1] entries hash, KEYS[2] index to read, KEYS[3] index to
-- intersect it with (when ARGV[1] is C.both), KEYS[4] scratch key (built
-- and deleted within the script).
-- ARGV[1] C.one or C.both, ARGV[2] max score ("+inf" or a number),
-- ARGV[3] offset among the entries scored at most ARGV[2], ARGV[4] count,
-- ARGV[5] "1" to return bodies, "0" for IDs only.
-- Returns {total, id1, score1, body1, id2, …}: total is the size of the
-- (intersected) index; a body is "" when not asked for (or missing).
local src = KEYS[2]
if ARGV[1] == C.both then
  redis.call('ZINTERSTORE', KEYS[4], 2, KEYS[2], KEYS[3], 'AGGREGATE', 'MAX')
  src = KEYS[4]
end
local total = redis.call('ZCARD', src)
local page = redis.call('ZREVRANGEBYSCORE', src, ARGV[2], '-inf', 'WITHSCORES', 'LIMIT', ARGV[3], ARGV[4])
if ARGV[1] == C.both then redis.call('DEL', KEYS[4]) end
local out = {total}
for i = 1, #page, 2 do
  local body = ''
  if ARGV[5] == '1' then body = redis.call('HGET', KEYS[1], page[i]) or '' end
  out[#out + 1] = page[i]
  out[#out + 1] = page[i + 1]
  out[#out + 1] = body
end
return out
