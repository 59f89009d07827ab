package cli

import (
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/agentq/agentq/worker"
)

type workerOptions struct {
	concurrency int
	http        string
	logLevel    string
	logFormat   string
}

func (o *workerOptions) Validate() error {
	if o.concurrency < 0 {
		return usageErr("--concurrency must be at least 1 (got %d)", o.concurrency)
	}
	switch o.logLevel {
	case "debug", "info", "warn", "error":
	default:
		return usageErr("--log-level must be debug, info, warn or error (got %q)", o.logLevel)
	}
	return checkLogFormat(o.logFormat)
}

// NewWorkerCmd builds the `worker` command. It runs until its context is
// canceled (main cancels it on SIGTERM/SIGINT), then shuts down gracefully.
func NewWorkerCmd(app *App) *cobra.Command {
	var g global
	o := &workerOptions{}
	root := newRoot(app, "worker", "Run agent tasks from Redis", &g)
	root.Args = noArgs
	root.Flags().IntVar(&o.concurrency, "concurrency", 0, "tasks run at once (default: worker.concurrency, 20)")
	root.Flags().StringVar(&o.http, "http", "", "listen address of /healthz /readyz /metrics /api/v1/agents (default: worker.http_addr)")
	root.Flags().StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	bindLogFormat(root, &o.logFormat)
	root.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := o.Validate(); err != nil {
			return err
		}
		cfg, err := g.loadConfig(app)
		if err != nil {
			return err
		}
		if o.concurrency > 0 {
			cfg.Worker.Concurrency = o.concurrency
		}
		if o.http != "" {
			cfg.Worker.HTTPAddr = o.http
		}
		log := NewLogger(app, o.logLevel, o.logFormat)
		for _, d := range cfg.Deprecations() {
			log.Warn("config: deprecated", "detail", d)
		}
		rdb, err := OpenRedis(cmd.Context(), app, cfg.Redis)
		if err != nil {
			return err
		}
		defer rdb.Close()
		defer startTracing(cmd.Context(), app, "agentq-worker")()
		w, err := worker.New(cfg, rdb, worker.WithLogger(log))
		if err != nil {
			return usageErr("%v", err)
		}
		if err := w.Run(cmd.Context()); err != nil {
			return runtimeErr(err)
		}
		return nil
	}
	return root
}

// Log formats (--log-format).
const (
	LogJSON = "json"
	LogText = "text"
)

// bindLogFormat adds --log-format to cmd, into format.
func bindLogFormat(cmd *cobra.Command, format *string) {
	cmd.Flags().StringVar(format, "log-format", "", "json or text (default: json when stderr is not a terminal, text when it is)")
}

// checkLogFormat refuses (exit 2) a --log-format that is neither json nor
// text ("" is the default).
func checkLogFormat(format string) error {
	switch format {
	case "", LogJSON, LogText:
		return nil
	}
	return usageErr("--log-format must be json or text (got %q)", format)
}

// NewLogger returns a slog logger on app.Err at level, in format (LogJSON
// or LogText); format "": JSON when app.Err is not a terminal, text
// otherwise.
func NewLogger(app *App, level, format string) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: lv}
	if format == "" {
		format = LogJSON
		if isTerminal(app.Err) {
			format = LogText
		}
	}
	if format == LogText {
		return slog.New(slog.NewTextHandler(app.Err, opts))
	}
	return slog.New(slog.NewJSONHandler(app.Err, opts))
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
