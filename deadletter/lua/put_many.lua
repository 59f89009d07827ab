-- put_many stores a batch of new entries; IDs already stored are left
-- alone (the caller replaces them with put.lua).
--
-- KEYS[1] entries hash, KEYS[2] main index, KEYS[3] set of index keys,
-- KEYS[4] refs hash, then for the i-th entry (from 1) KEYS[3+2i] its
-- agent index and KEYS[4+2i] its class index.
-- ARGV: for the i-th entry ARGV[4i-3] id, ARGV[4i-2] body, ARGV[4i-1]
-- score, ARGV[4i] ref (refString).
-- Returns one code per entry: 1 stored, 0 already stored (left alone).
local out = {}
for i = 1, #ARGV / 4 do
  local id, body, score = ARGV[4*i-3], ARGV[4*i-2], ARGV[4*i-1]
  if redis.call('HSETNX', KEYS[1], id, body) == 1 then
    redis.call('HSET', KEYS[4], id, ARGV[4*i])
    redis.call('ZADD', KEYS[2], score, id)
    for k = 3+2*i, 4+2*i do
      redis.call('ZADD', KEYS[k], score, id)
      redis.call('SADD', KEYS[3], KEYS[k])
    end
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
