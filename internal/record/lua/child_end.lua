-- child_end.lua: records how a child ended in its parent's child ends
-- hash (Store.ChildEnded), in the parent's slot, and says whether the
-- parent resumes: the first write of a child's end wins; the parent
-- resumes when it is in state waiting at the run of its children wait
-- and (mode all) every child has ended or (mode any) this child
-- succeeded or every child has ended. The record is marked
-- (F.children_resumed = the run) so that a later end never answers
-- resume again: one resume per wait. With no child ID (the repair's
-- look) it writes no end and answers resume when the wait is due
-- (counting the successes already recorded) or was marked resumed and
-- the parent still waits (a resume whose RunNow was cut by a crash).
-- KEYS[1] parent record, KEYS[2] child specs hash (rkeys.TaskChildSpecs),
-- KEYS[3] child ends hash (rkeys.TaskChildEnds)
-- ARGV[1] child ID ("": the repair's look), ARGV[2] the end's JSON,
-- ARGV[3] "1" when the child succeeded, ARGV[4] the waiting state's name,
-- ARGV[5] the succeeded state's JSON fragment ('"state":"succeeded"')
-- Returns {code, resume, run, queue, mode}: code R.applied (the end was
-- recorded, or the look was made) or R.again (the child's end was
-- recorded already: nothing written); resume 1 when the caller must make
-- the parent's run (run, on queue) pending, mode the wait's; or {R.missing} (no record)
-- or {R.stale} (the child is not one of the parent's last children wait).
local cur = redis.call("HMGET", KEYS[1], F.state, F.run, F.queue, F.children_run, F.children_mode,
  F.children_n, F.children_ended, F.children_resumed)
if not cur[1] then return {R.missing} end
local code, ended, success, look = R.applied, tonumber(cur[7]) or 0, false, ARGV[1] == ""
if not look then
  if redis.call("HEXISTS", KEYS[2], ARGV[1]) == 0 then return {R.stale} end
  if redis.call("HSETNX", KEYS[3], ARGV[1], ARGV[2]) == 1 then
    ended = redis.call("HINCRBY", KEYS[1], F.children_ended, 1)
    success = ARGV[3] == "1"
    local ttl = redis.call("TTL", KEYS[2])
    if ttl > 0 then redis.call("EXPIRE", KEYS[3], ttl) end
  else
    code = R.again
  end
end
local run, queue, mode = cur[2] or "0", cur[3] or "", cur[5] or ""
if cur[1] ~= ARGV[4] or cur[2] ~= cur[4] then return {code, 0, run, queue, mode} end
if cur[8] == cur[4] then return {code, look and 1 or 0, run, queue, mode} end
local due = ended >= (tonumber(cur[6]) or 0) or (cur[5] == "any" and success)
if look and not due and cur[5] == "any" then
  for _, v in ipairs(redis.call("HVALS", KEYS[3])) do
    if string.find(v, ARGV[5], 1, true) then due = true; break end
  end
end
if not due then return {code, 0, run, queue, mode} end
redis.call("HSET", KEYS[1], F.children_resumed, cur[4])
return {code, 1, run, queue, mode}
