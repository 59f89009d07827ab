-- release ends a holder's lease at once (a graceful stop hands the job
-- over to the next worker that claims it), unless the key is another
-- holder's by now.
--
-- KEYS[1] the lease's key.
-- ARGV[1] the holder.
-- Returns 1 when the lease was this holder's and is gone, else 0.
if redis.call("GET", KEYS[1]) == ARGV[1] then
  return redis.call("DEL", KEYS[1])
end
return 0
