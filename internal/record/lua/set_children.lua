-- set_children.lua: stores the children of a parent's children wait
-- (Store.SetChildren), in the parent's slot: the ordered list of child
-- IDs, each child's spec (what the children repair enqueues when the
-- child does not exist) and, on the record, the wait's run, mode and
-- counts. A new wait (another run) replaces the last one's list, specs
-- and ends; the same run's wait written again (a repeated suspend, a
-- retried call) keeps what is there.
-- KEYS[1] parent record, KEYS[2] children list (rkeys.TaskChildren),
-- KEYS[3] child specs hash (rkeys.TaskChildSpecs), KEYS[4] child ends hash
-- (rkeys.TaskChildEnds)
-- ARGV[1] the run that waits (the run the Waiting write moves the record
-- to), ARGV[2] mode ("all" or "any"), ARGV[3] lifetime (s) added to the
-- record's remaining one for the three keys, ARGV[4], ARGV[5], … pairs of
-- child ID and spec (JSON), in spawn order
-- Returns {R.applied, n} (n children stored), or, writing nothing:
-- {R.again, n} (this run's wait is stored already), {R.missing} (no
-- record), {R.canceled}, {R.ended} (the task has ended) or {R.stale}
-- (the record is at a newer run than ARGV[1]).
local cur = redis.call("HMGET", KEYS[1], F.state, F.run, F.children_run, F.children_n)
if not cur[1] then return {R.missing} end
if cur[1] == S.canceled then return {R.canceled} end
if TERMINAL(cur[1]) then return {R.ended} end
if tonumber(cur[2] or "0") > tonumber(ARGV[1]) then return {R.stale} end
if cur[3] == ARGV[1] then return {R.again, tonumber(cur[4]) or 0} end
redis.call("DEL", KEYS[2], KEYS[3], KEYS[4])
local n = (#ARGV - 3) / 2
for i = 4, #ARGV, 2 do
  redis.call("RPUSH", KEYS[2], ARGV[i])
  redis.call("HSET", KEYS[3], ARGV[i], ARGV[i + 1])
end
redis.call("HSET", KEYS[1], F.children_run, ARGV[1], F.children_mode, ARGV[2], F.children_n, n,
  F.children_ended, 0, F.children_resumed, -1)
local ttl = redis.call("TTL", KEYS[1])
local life = math.max(ttl, 0) + tonumber(ARGV[3])
if n > 0 then
  redis.call("EXPIRE", KEYS[2], life)
  redis.call("EXPIRE", KEYS[3], life)
end
return {R.applied, n}
