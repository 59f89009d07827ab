package cli

import (
	"fmt"
	"log/slog"
	"net"

	"github.com/spf13/cobra"

	"github.com/agentq/agentq/api"
)

// newServeCmd builds `enqueuer serve`: the HTTP API of package api. The
// process's main owns the signals: serve stops gracefully when the command's
// context is done.
func newServeCmd(app *App, g *global) *cobra.Command {
	var (
		addr    string
		maxBody int64
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the HTTP API (POST /api/v1/tasks, GET /api/v1/tasks/{id}, …)",
		Long: `Serve agentq's HTTP API on --http (default ` + api.DefaultAddr + `, loopback only):

  POST /api/v1/tasks                      enqueue a task, or a batch {"tasks":[…]}
  GET  /api/v1/tasks/{id}                 a task's state and history
  GET  /api/v1/agents                     configured agents with their circuit breaker
  GET  /api/v1/deadletters                dead letters (?limit=50&offset=0&agent=&class=)
  POST /api/v1/deadletters/{id}/requeue   requeue a dead letter
  GET  /api/v1/openapi.yaml               the OpenAPI 3 document
  GET  /healthz                           liveness and Redis reachability (no auth)

When ` + api.EnvToken + ` is set, every route but /healthz and the OpenAPI
document requires "Authorization: Bearer <token>". Errors are JSON
{"code":"…","error":"…"}. SIGINT/SIGTERM stop the server gracefully.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if maxBody <= 0 {
				return usageErr("--max-body must be positive (got %d)", maxBody)
			}
			cfg, rdb, err := g.connect(cmd.Context(), app)
			if err != nil {
				return err
			}
			defer rdb.Close()
			token := app.Getenv(api.EnvToken)
			log := slog.New(slog.NewTextHandler(app.Err, nil))
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return runtimeErr(fmt.Errorf("listen on %s: %w", addr, err))
			}
			if token == "" {
				log.Warn("no " + api.EnvToken + " set: the API accepts requests without authentication")
			}
			if len(cfg.Agents) == 0 {
				log.Warn("the config names no agents: tasks for any agent name are accepted")
			}
			log.Info("enqueuer serve: HTTP API listening", "addr", "http://"+ln.Addr().String(), "auth", token != "", "agents", cfg.AgentNames(), "queues", cfg.ServedQueues())
			srv := api.New(rdb, cfg, api.Options{Token: token, MaxBody: maxBody, Logger: log})
			if err := srv.Serve(cmd.Context(), ln); err != nil {
				return runtimeErr(err)
			}
			log.Info("enqueuer serve: stopped")
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "http", api.DefaultAddr, "listen address of the HTTP API")
	cmd.Flags().Int64Var(&maxBody, "max-body", api.DefaultMaxBody, "request body limit in bytes (larger bodies get 413 request_too_large)")
	return cmd
}
