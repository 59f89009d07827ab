// Package cli implements agentq's commands (enqueuer, worker, inspector) as
// cobra command trees that write to the io.Writers of an App, so they can
// be tested through SetArgs and a buffer. The mains in cmd/ only call Main.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/buildinfo"
)

// Exit statuses (DESIGN.md §3).
const (
	ExitOK          = 0
	ExitFailure     = 1 // failed at run time: Redis unreachable, …
	ExitUsage       = 2 // bad usage or bad input
	ExitUnavailable = 3 // fail-fast enqueue refused: the agent's breaker is open
	ExitTaskFailed  = 4 // enqueuer --wait: the task ended dead_lettered or canceled
	ExitWaitTimeout = 5 // enqueuer --wait: --wait-timeout elapsed before the task ended
)

// ExitError carries the exit status of a failed command.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// usageErr marks err as bad usage or bad input (exit 2).
func usageErr(format string, args ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

// runtimeErr marks err as a run-time failure (exit 1).
func runtimeErr(err error) error {
	var ee *ExitError
	if errors.As(err, &ee) {
		return err
	}
	return &ExitError{Code: ExitFailure, Err: err}
}

// App is what a command tree writes to and reads from.
type App struct {
	Out    io.Writer
	Err    io.Writer
	In     io.Reader
	Getenv func(string) string
}

// NewApp returns an App on the process's standard streams.
func NewApp() *App { return &App{Out: os.Stdout, Err: os.Stderr, In: os.Stdin, Getenv: os.Getenv} }

// Exec is a command's main: it runs the command tree newCmd on the
// process's arguments and standard streams until the command ends, or
// SIGINT or SIGTERM cancels its context, and returns its exit status for
// os.Exit.
func Exec(newCmd func(*App) *cobra.Command) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return Main(ctx, NewApp(), newCmd, os.Args[1:])
}

// Main runs the command tree built by newCmd with args and returns the exit
// status, printing the error (if any) to app.Err.
func Main(ctx context.Context, app *App, newCmd func(*App) *cobra.Command, args []string) int {
	cmd := newCmd(app)
	cmd.SetArgs(args)
	cmd.SetOut(app.Out)
	cmd.SetErr(app.Err)
	cmd.SetIn(app.In)
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	fmt.Fprintf(app.Err, "%s: error: %s\n", cmd.Name(), cleanText(err.Error()))
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	// cobra's own errors: unknown command, flag or argument count.
	return ExitUsage
}

// EnvConfig names the config file's path for every command when --config
// is not given (--config wins).
const EnvConfig = "AGENTQ_CONFIG"

// global holds the flags every command takes.
type global struct {
	configPath string
	redisURL   string
}

func (g *global) bind(cmd *cobra.Command) {
	cmd.PersistentFlags().StringVar(&g.configPath, "config", "", "config file (YAML; default: $"+EnvConfig+")")
	cmd.PersistentFlags().StringVar(&g.redisURL, "redis", "", "Redis URL (overrides AGENTQ_REDIS_URL and the config)")
}

func newRoot(app *App, use, short string, g *global) *cobra.Command {
	root := &cobra.Command{
		Use: use, Short: short, SilenceUsage: true, SilenceErrors: true,
		Version: buildinfo.Version(),
	}
	root.SetVersionTemplate(buildinfo.String(use) + "\n")
	g.bind(root)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("%w (see %s --help)", err, c.CommandPath())}
	})
	return root
}

// config is the config file's path: --config, else $AGENTQ_CONFIG, else
// "" (the defaults).
func (g *global) config(app *App) string {
	if g.configPath != "" {
		return g.configPath
	}
	return app.Getenv(EnvConfig)
}

// needConfig refuses (exit 2) a command whose answer comes from the config
// when no config is given: without one it would print an empty or wrong
// answer.
func (g *global) needConfig(app *App, command string) error {
	if g.config(app) == "" {
		return usageErr("%s needs the config: pass --config or set %s", command, EnvConfig)
	}
	return nil
}

// loadConfig reads --config or $AGENTQ_CONFIG (or defaults), applies
// AGENTQ_REDIS_URL and --redis. A bad file is bad input (exit 2).
func (g *global) loadConfig(app *App) (*config.Config, error) {
	var cfg *config.Config
	var err error
	if path := g.config(app); path == "" {
		cfg = config.Default()
	} else {
		data, rerr := config.ReadFile(path)
		if rerr != nil {
			return nil, usageErr("read config: %v", rerr)
		}
		cfg, err = config.Parse(data, path)
		if err != nil {
			return nil, &ExitError{Code: ExitUsage, Err: err}
		}
	}
	cfg.ApplyEnv(app.Getenv)
	if g.redisURL != "" {
		cfg.Redis.UseURL(g.redisURL)
	}
	return cfg, nil
}

// connect loads the config and opens Redis, checking it answers.
func (g *global) connect(ctx context.Context, app *App) (*config.Config, redis.UniversalClient, error) {
	cfg, err := g.loadConfig(app)
	if err != nil {
		return nil, nil, err
	}
	rdb, err := OpenRedis(ctx, app, cfg.Redis)
	if err != nil {
		return nil, nil, err
	}
	return cfg, rdb, nil
}

// OpenRedis opens the Redis that r names — one server, a Sentinel group or
// a Cluster (a bad location is exit 2) — and pings it (the master; on a
// Cluster one node, so that a process started while a master fails over
// does not exit for it; unreachable is exit 1). Passwords' ${VAR} are read
// from app's environment.
func OpenRedis(ctx context.Context, app *App, r config.Redis) (redis.UniversalClient, error) {
	rdb, err := r.NewClient(app.Getenv)
	if err != nil {
		return nil, usageErr("bad Redis location %s: %v", r.Where(), err)
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, runtimeErr(fmt.Errorf("redis unreachable at %s: %w", r.Where(), err))
	}
	return rdb, nil
}

// exactArgs is cobra.ExactArgs with a usage exit status.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageErr("%s takes %s (got %d arguments)", cmd.CommandPath(), what, len(args))
		}
		return nil
	}
}

func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageErr("%s takes no arguments (got %q)", cmd.CommandPath(), args)
	}
	return nil
}
