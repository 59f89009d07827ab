package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
)

// A config file over config.MaxFileSize is bad input (exit 2) named with
// its path and the limit, and is not decoded.
func TestConfigFileSizeCap(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "huge.yaml")
	line := "# " + strings.Repeat("x", 1021) + "\n"
	require.NoError(t, os.WriteFile(path, []byte(strings.Repeat(line, 4*1024+1)), 0o600))
	for _, tc := range []struct {
		name   string
		newCmd func(*App) *cobra.Command
		args   []string
	}{
		{"inspector", NewInspectorCmd, []string{"--config", path, "stats"}},
		{"worker", NewWorkerCmd, []string{"--config", path}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, code := runCmd(t, tc.newCmd, "", tc.args...)
			require.Equal(t, ExitUsage, code, errOut)
			require.Contains(t, errOut, path)
			require.Contains(t, errOut, "4 MiB limit")
		})
	}
}
