-- server_ms.lua: a Lua expression of the Redis server's TIME in ms
-- (redisx.LuaServerMS), rendered where a script names SERVER_NOW_MS: the
-- server's clock, never an injected one, without a function defined on
-- every call. No KEYS or ARGV; it returns the time in ms.
(function() local t = redis.call('TIME') return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) end)()
