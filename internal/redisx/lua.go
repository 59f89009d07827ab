package redisx

// LuaNowMS is the Lua helper every script that reads the clock starts
// with; scripts concatenate it in front of their body:
//
//	now_ms(a) - a's number when a is one (an injected clock's
//	  milliseconds, passed in ARGV by tests), else the Redis server's
//	  TIME in ms: one clock for the whole fleet, whatever the workers'
//	  clocks say.
//
// Pass "" in ARGV for the server's TIME.
const LuaNowMS = `
local function now_ms(a)
  local n = tonumber(a)
  if n then return n end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
`

// LuaServerMS is a Lua expression of the Redis server's TIME in ms, for a
// script that must read the server's clock (never an injected one) on a
// rare path without defining a function on every call.
const LuaServerMS = `(function() local t = redis.call('TIME') return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) end)()`
