package cli

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/api"
	"github.com/agentq/agentq/internal/console"
)

// TestServeHelpListsEveryRouteAndPage: `enqueuer serve --help` lists every
// route of the API's table with its summary and every page of the
// console's navigation bar (it once listed 7 routes and 5 pages of 17 and
// 12).
func TestServeHelpListsEveryRouteAndPage(t *testing.T) {
	t.Parallel()
	out, errOut, code := runCmd(t, NewEnqueuerCmd, "", "serve", "--help")
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(out, "\n")
	has := func(method, path, text string) {
		t.Helper()
		for _, l := range lines {
			if f := strings.Fields(l); len(f) > 2 && f[0] == method && f[1] == path && strings.Contains(l, text) {
				return
			}
		}
		require.Failf(t, "missing from serve --help", "%s %s (%s)", method, path, text)
	}
	routes := api.Routes()
	require.GreaterOrEqual(t, len(routes), 17)
	for _, r := range routes {
		has(r.Method, r.Path, strings.TrimSuffix(r.Summary, "."))
	}
	pages := console.Pages()
	require.GreaterOrEqual(t, len(pages), 12)
	for _, p := range pages {
		has("GET", console.Base+p.Path, p.Name+": "+p.About)
	}
}
