package limit

import (
	"embed"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/redisx"
)

// The fields of a key's state hash (rkeys.LimitState): the configuration
// Register writes, the pause, the sequence of starts and debits, the
// tokens used within the window, and the refusals per limit
// (fieldDeferrals + the Kind). The scripts name them F.<name>.
const (
	fieldRequests     = "requests"
	fieldTokens       = "tokens"
	fieldPerMS        = "per_ms"
	fieldConcurrency  = "concurrency"
	fieldPausedUntil  = "paused_until"
	fieldPausedReason = "paused_reason"
	fieldSeq          = "seq"
	fieldTokensUsed   = "tokens_used"
	fieldDeferrals    = "deferrals:"
)

// scripts are the limiter's Lua (lua/*.lua): F names a state field, K a
// limit (Kind).
var scripts = redisx.NewScripts("limit", luaFiles, map[string]map[string]string{
	"F": redisx.Literals(map[string]any{
		"requests": fieldRequests, "tokens": fieldTokens, "per_ms": fieldPerMS, "concurrency": fieldConcurrency,
		"paused_until": fieldPausedUntil, "paused_reason": fieldPausedReason, "seq": fieldSeq, "tokens_used": fieldTokensUsed,
		"deferrals_requests": fieldDeferrals + string(Requests), "deferrals_tokens": fieldDeferrals + string(Tokens),
		"deferrals_concurrency": fieldDeferrals + string(Concurrency), "deferrals_paused": fieldDeferrals + string(Paused),
	}),
	"K": redisx.Literals(map[string]any{
		"requests": string(Requests), "tokens": string(Tokens), "concurrency": string(Concurrency), "paused": string(Paused),
	}),
})

//go:embed lua/*.lua
var luaFiles embed.FS

// script is the limit script lua/name, after the prelude.
func script(name string) *redis.Script {
	return scripts.Script(redisx.NowMS, "lua/prelude.lua", "lua/"+name)
}
