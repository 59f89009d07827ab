package redisx

import (
	"embed"
	"strings"
)

//go:embed lua/now_ms.lua lua/server_ms.lua
var clockFiles embed.FS

// LuaServerMS is a Lua expression of the Redis server's TIME in ms
// (lua/server_ms.lua without its comments), for a script that must read
// the server's clock (never an injected one) on a rare path without
// defining a function on every call. Scripts name it SERVER_NOW_MS.
var LuaServerMS = luaCode("lua/server_ms.lua")

// LuaNowMS is the Lua helper every script that reads the clock starts
// with (lua/now_ms.lua, its SERVER_NOW_MS rendered); scripts concatenate
// it in front of their body (Scripts: the name NowMS):
//
//	now_ms(a) - a's number when a is one (an injected clock's
//	  milliseconds, passed in ARGV by tests), else the Redis server's
//	  TIME in ms: one clock for the whole fleet, whatever the workers'
//	  clocks say.
//
// Pass "" in ARGV for the server's TIME.
var LuaNowMS = "\n" + strings.ReplaceAll(luaCode("lua/now_ms.lua"), "SERVER_NOW_MS", LuaServerMS) + "\n"

// luaCode is the embedded file name without its comment lines and
// surrounding space.
func luaCode(name string) string {
	b, err := clockFiles.ReadFile(name)
	if err != nil {
		panic("redisx: " + err.Error())
	}
	var code []string
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			code = append(code, line)
		}
	}
	return strings.TrimSpace(strings.Join(code, "\n"))
}
