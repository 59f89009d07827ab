-- retry.lua: makes the deliveries to one webhook of one task due now
-- (Retry). A given-up delivery gets a fresh max_age (its J.first is now);
-- a field gone meanwhile (delivered) is skipped.
-- KEYS[1] the task's deliveries hash (rkeys.TaskHooks: field -> Delivery
-- JSON)
-- ARGV[1] the task; ARGV[2] now ms; ARGV[3..] the deliveries' fields
-- Returns how many deliveries were made due.
local n = 0
for i = 3, #ARGV do
  local raw = redis.call("HGET", KEYS[1], ARGV[i])
  if raw then
    local ok, d = pcall(cjson.decode, raw)
    if ok and type(d) == "table" then
      if d[J.given_up] and d[J.given_up] ~= 0 then d[J.given_up] = nil; d[J.first] = tonumber(ARGV[2]) end
      d[J.next] = tonumber(ARGV[2])
      redis.call("HSET", KEYS[1], ARGV[i], cjson.encode(d))
      n = n + 1
    end
  end
end
return n
