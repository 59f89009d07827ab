package resilience

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestImportsNoRedis: classification and policy are pure Go. The breaker
// and the limiter (internal/breaker, internal/limit) hold everything
// that talks to Redis; this package must not depend on a Redis client or
// on agentq's Redis layer, directly or through another package.
func TestImportsNoRedis(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "github.com/agentq/agentq/resilience").CombinedOutput()
	require.NoError(t, err, "%s", out)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "net/http", "go list -deps printed no dependency list")
	for _, d := range deps {
		for _, banned := range []string{"github.com/redis/", "github.com/hibiken/asynq", "github.com/agentq/agentq/internal/redisx", "github.com/agentq/agentq/internal/rkeys", "github.com/agentq/agentq/resilience/"} {
			require.False(t, strings.HasPrefix(d, banned), "resilience depends on %s", d)
		}
	}
}
