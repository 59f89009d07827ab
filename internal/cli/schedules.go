package cli

import (
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentq/agentq/internal/inspect"
	"github.com/agentq/agentq/internal/schedule"
)

// schedulesCmd is `inspector schedules`: the config's schedules with
// their next and last fire and the last task's ID and state.
func schedulesCmd(app *App, g *global) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{Use: "schedules", Short: "The config's schedules: cron, zone, agent, next and last fire, last task and its state",
		Args: noArgs,
		RunE: g.withSession(app, func([]string) error { return g.needConfig(app, "inspector schedules") }, func(cmd *cobra.Command, _ []string, s *session) error {
			list, err := inspect.Schedules(cmd.Context(), s.rdb, s.cfg, time.Now())
			if err != nil {
				return runtimeErr(err)
			}
			printList(app, asJSON, list, "NAME\tCRON\tTIMEZONE\tAGENT\tNEXT FIRE\tLAST FIRE\tLAST TASK\tSTATE",
				func(w io.Writer, st schedule.Status) {
					tprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", st.Name, st.Cron, st.Timezone, st.Agent,
						tsp(st.NextFire), tsp(st.LastFire), orDash(st.LastTaskID), orDash(string(st.LastState)))
				})
			return nil
		})}
	cmd.Flags().BoolVar(&asJSON, "json", false, "JSON Lines")
	return cmd
}
