// Package testbin builds Go programs for tests that need a real executable
// (exec agents, workers killed with SIGKILL, …).
//
// Each package is built at most once per test process: the binaries go to a
// directory under os.TempDir named after the process ID, and directories left
// behind by test processes that no longer run are removed, best effort, the
// next time a test process builds something. When the test binary was built
// with -race, the programs are built with -race as well.
package testbin

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// dirPrefix names the per-process cache directories under os.TempDir.
const dirPrefix = "agentq-testbin-"

type build struct {
	once   sync.Once
	path   string
	output string
	err    error
}

var (
	mu      sync.Mutex
	builds  = map[string]*build{}
	dirOnce sync.Once
	dir     string
	dirErr  error
)

// Build builds the Go package pkg (an import path such as
// "github.com/agentq/agentq/internal/testagent", or a path relative to the
// test's working directory) and returns the path of the binary. Concurrent
// and repeated calls for the same pkg share one build. A failed build fails
// the test with the compiler's output.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	mu.Lock()
	b, ok := builds[pkg]
	if !ok {
		b = &build{}
		builds[pkg] = b
	}
	mu.Unlock()

	b.once.Do(func() { b.path, b.output, b.err = doBuild(pkg) })
	if b.err != nil {
		t.Fatalf("testbin: build %s: %v\n%s", pkg, b.err, b.output)
	}
	return b.path
}

func doBuild(pkg string) (string, string, error) {
	dirOnce.Do(func() {
		cleanStale()
		dir = filepath.Join(os.TempDir(), dirPrefix+strconv.Itoa(os.Getpid()))
		dirErr = os.MkdirAll(dir, 0o755)
	})
	if dirErr != nil {
		return "", "", dirErr
	}
	sum := sha256.Sum256([]byte(pkg))
	name := path.Base(filepath.ToSlash(pkg))
	if name == "." || name == "/" || name == "" {
		name = "main"
	}
	out := filepath.Join(dir, name+"-"+hex.EncodeToString(sum[:4]))

	args := []string{"build", "-o", out}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, pkg)
	cmd := exec.Command(GoTool(), args...)
	output, err := cmd.CombinedOutput()
	if err != nil {
		return "", string(output), err
	}
	return out, string(output), nil
}

// GoTool finds the go command: the one in PATH, else the one of the
// toolchain that built this test.
func GoTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	return "go"
}

// cleanStale removes cache directories of test processes that have exited.
// Errors are ignored: this is housekeeping only.
func cleanStale() {
	entries, err := os.ReadDir(os.TempDir())
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), dirPrefix) {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimPrefix(e.Name(), dirPrefix))
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); err == syscall.ESRCH {
			_ = os.RemoveAll(filepath.Join(os.TempDir(), e.Name()))
		}
	}
}
