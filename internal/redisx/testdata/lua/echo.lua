-- echo.lua: a test script: sets KEYS[1]'s field F.state to ARGV[1].
-- KEYS[1] a hash
-- ARGV[1] a value
-- Returns C.done.
redis.call("HSET", KEYS[1], F.state, ARGV[1])
return C.done
