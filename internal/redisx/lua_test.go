package redisx_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLuaNowMSOnce: the scripts' clock helper is written once, as
// LuaNowMS; every other script concatenates it instead of reading the
// server's TIME by itself.
func TestLuaNowMSOnce(t *testing.T) {
	t.Parallel()
	clock := regexp.MustCompile(`local function now_ms|redis\.call\(\s*['"]TIME['"]`)
	var found []string
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".lua") && (!strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go")) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if clock.Match(b) {
			found = append(found, filepath.ToSlash(path))
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, []string{"../../internal/redisx/lua/now_ms.lua", "../../internal/redisx/lua/server_ms.lua"}, found, "scripts read the Redis clock through redisx.LuaNowMS and LuaServerMS only")
}
