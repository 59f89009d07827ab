-- purge deletes every dead-letter key, provided the caller named every
-- agent/class index key in use.
--
-- KEYS[1] entries hash, KEYS[2] main index, KEYS[3] set of index keys,
-- KEYS[4] scratch key, KEYS[5] refs hash, KEYS[6…] the members of KEYS[3]
-- the caller read.
-- No ARGV.
-- Returns the number of entries deleted, or -1 when KEYS[3] holds a key
-- not in KEYS[6…] (nothing deleted; read the set again and retry).
local known = {}
for i = 6, #KEYS do known[KEYS[i]] = true end
for _, k in ipairs(redis.call('SMEMBERS', KEYS[3])) do
  if not known[k] then return -1 end
end
local n = redis.call('HLEN', KEYS[1])
for i = 1, #KEYS do redis.call('UNLINK', KEYS[i]) end
return n
