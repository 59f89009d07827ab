package record

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestApplyScriptsAreLean: the checked write runs on every attempt's
// outcome, and every function a script defines is a closure made on each
// call: its scripts define rec_apply and the rare paths only (the
// history's, and the webhook outbox of a task that names webhooks),
// and build the stored event with one concatenation (Go sends the event
// without its "{").
func TestApplyScriptsAreLean(t *testing.T) {
	t.Parallel()
	fn := regexp.MustCompile(`(?m)^local function (\w+)`)
	for name, src := range map[string]string{
		"apply.lua":       render(base + mustLua("rec_apply.lua") + mustLua("apply.lua")),
		"apply_acked.lua": render(base + mustLua("rec_apply.lua") + mustLua("apply_acked.lua")),
	} {
		var defined []string
		for _, m := range fn.FindAllStringSubmatch(src, -1) {
			defined = append(defined, m[1])
		}
		require.Equal(t, []string{"hist_merge", "hist_trim", "rec_outbox", "rec_apply"}, defined, name)
		body := src[strings.Index(src, "local function rec_apply"):]
		require.NotContains(t, body, "string.sub", name+": the common path cuts no string")
	}
	w := NewStore(nil).write(Succeeded(Attempt{Attempt: 1}, nil))
	require.False(t, strings.HasPrefix(string(w.event), "{"), string(w.event))
	require.True(t, strings.HasPrefix(string(w.event), `"at":`), string(w.event))
}
