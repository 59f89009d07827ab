package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/testbin"
	"github.com/agentq/agentq/tasks"
)

const mod = "github.com/agentq/agentq"

// bins are the project's commands and the test agent, built once.
type bins struct {
	worker, enqueuer, inspector, agent string
}

// buildBins is where every end-to-end test starts: under -short (make
// unit) it skips the test, which runs the commands as subprocesses and
// takes seconds.
func buildBins(t *testing.T) bins {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: runs the commands as subprocesses; skipped with -short (make unit)")
	}
	return bins{
		worker:    testbin.Build(t, mod+"/cmd/worker"),
		enqueuer:  testbin.Build(t, mod+"/cmd/enqueuer"),
		inspector: testbin.Build(t, mod+"/cmd/inspector"),
		agent:     testbin.Build(t, mod+"/internal/testagent"),
	}
}

// run runs a command to completion and returns stdout, stderr, exit code.
func run(t *testing.T, stdin string, bin string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Stdin = strings.NewReader(stdin)
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return out.String(), errb.String(), code
}

// proc is a background process (a worker) whose output goes to a file.
type proc struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	once sync.Once
	err  error
}

func start(t *testing.T, name, bin string, args ...string) *proc {
	t.Helper()
	return startEnv(t, name, nil, bin, args...)
}

// startEnv is start with extra environment variables (NAME=value) for the process.
func startEnv(t *testing.T, name string, env []string, bin string, args ...string) *proc {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	f, err := os.Create(logPath)
	require.NoError(t, err)
	cmd := exec.Command(bin, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	p := &proc{cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); _ = f.Close(); close(p.done) }()
	t.Cleanup(func() {
		p.signal(syscall.SIGKILL)
		<-p.done
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("%s log (tail):\n%s", name, tail(string(b), 4000))
		}
	})
	return p
}

func (p *proc) signal(sig syscall.Signal) {
	select {
	case <-p.done:
	default:
		_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	}
}

// stop sends SIGTERM and waits up to d for the exit.
func (p *proc) stop(t *testing.T, d time.Duration) int {
	t.Helper()
	p.signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(d):
		t.Fatalf("process did not exit within %s of SIGTERM", d)
	}
	if ee, ok := p.err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return 0
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func freeAddr(t *testing.T) string {
	return fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t))
}

// waitHTTP polls url until it answers 200.
func waitHTTP(t *testing.T, url string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s did not answer 200 within %s", url, d)
}

// waitStates polls the task store until every task is in a terminal state.
func waitStates(t *testing.T, rdb redis.UniversalClient, ids []string, d time.Duration) map[string]*tasks.View {
	t.Helper()
	st := tasks.NewStore(rdb)
	deadline := time.Now().Add(d)
	views := map[string]*tasks.View{}
	for {
		pending := []string{}
		for _, id := range ids {
			v, err := st.Get(context.Background(), id)
			if err == nil && v.State.Terminal() {
				views[id] = v
				continue
			}
			state := "none"
			if v != nil {
				state = string(v.State)
			}
			pending = append(pending, fmt.Sprintf("%s=%s", id, state))
		}
		if len(pending) == 0 {
			return views
		}
		if time.Now().After(deadline) {
			t.Fatalf("tasks not terminal after %s: %v", d, pending)
		}
		time.Sleep(25 * time.Millisecond)
	}
}
