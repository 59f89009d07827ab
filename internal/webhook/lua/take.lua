-- take moves a task's outbox entries into its deliveries. The entries go
-- only when the outbox still starts with them (a second holder of a lost
-- lease took them already: nothing is written); a delivery already there
-- is kept.
--
-- KEYS[1] outbox, KEYS[2] deliveries hash.
-- ARGV[1] how many entries were read, ARGV[2] the first of them as read,
-- ARGV[3] the hash's lifetime (s), ARGV[4..] field/value pairs of the new
-- deliveries.
-- Returns 1 when taken, 0 otherwise.
if redis.call("LINDEX", KEYS[1], 0) ~= ARGV[2] then return 0 end
for i = 4, #ARGV, 2 do redis.call("HSETNX", KEYS[2], ARGV[i], ARGV[i + 1]) end
redis.call("LTRIM", KEYS[1], tonumber(ARGV[1]), -1)
if #ARGV >= 4 then redis.call("EXPIRE", KEYS[2], ARGV[3]) end
return 1
