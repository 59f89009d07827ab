package breaker

import (
	"embed"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/redisx"
)

// The fields of a breaker's hash (rkeys.Breaker), as the scripts write
// them (F.<name> in lua/*.lua) and parseSnapshot reads them; and the
// fields of rate mode's window hash besides its buckets.
const (
	fieldState               = "state"
	fieldGeneration          = "generation"
	fieldConsecutiveFailures = "consecutive_failures"
	fieldOpenUntil           = "open_until"
	fieldCooldown            = "cooldown"
	fieldFailureCount        = "failure_count"
	fieldSuccessCount        = "success_count"
	fieldLastFailureAt       = "last_failure_at"
	fieldLastSuccessAt       = "last_success_at"
	fieldWidth               = "width"
	fieldHotAt               = "hot_at"
)

// The codes recordScript takes for an outcome (Outcome.lua) and a mode.
const (
	luaSuccess     = "s"
	luaFailure     = "f"
	luaIgnore      = "i"
	luaRate        = "r"
	luaConsecutive = "c"
)

// scripts are the breaker's Lua (lua/*.lua): F names a hash field, C a
// state or a code.
var scripts = redisx.NewScripts("breaker", luaFiles, map[string]map[string]string{
	"F": redisx.Quoted(fieldState, fieldGeneration, fieldConsecutiveFailures, fieldOpenUntil, fieldCooldown,
		fieldFailureCount, fieldSuccessCount, fieldLastFailureAt, fieldLastSuccessAt, fieldWidth, fieldHotAt),
	"C": redisx.Literals(map[string]any{
		"closed": string(StateClosed), "open": string(StateOpen), "half_open": string(StateHalfOpen),
		"success": luaSuccess, "failure": luaFailure, "ignore": luaIgnore,
		"rate": luaRate, "consecutive": luaConsecutive,
	}),
})

//go:embed lua/*.lua
var luaFiles embed.FS

// script is the breaker script lua/name, after the prelude.
func script(name string) *redis.Script {
	return scripts.Script(redisx.NowMS, "lua/prelude.lua", "lua/"+name)
}

// windowScript is the breaker script lua/name, after the prelude and
// rate mode's window functions (lua/window.lua).
func windowScript(name string) *redis.Script {
	return scripts.Script(redisx.NowMS, "lua/prelude.lua", "lua/window.lua", "lua/"+name)
}

// luaPrelude is the prelude (now_ms, lua/prelude.lua) rendered, for the
// scripts not yet in files.
var luaPrelude = scripts.Source(redisx.NowMS, "lua/prelude.lua")
