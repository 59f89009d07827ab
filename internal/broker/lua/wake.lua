-- wake.lua: push wake-up tokens for tasks made pending by a write that
-- could not carry them (the inspector's run of a deferred task, a
-- repair that made tenants ready). Built after lib/wake.lua.
-- KEYS[1] the queue's wake list (rkeys.Wake)
-- ARGV[1] tokens wanted, ARGV[2] cap
-- Returns the number of tokens pushed.
return agentq_wake(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]))
