package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentq/agentq/internal/inspect"
)

// workersCmd is `inspector workers [--json]`: every worker process in the
// worker registry (inspect.Workers), alive or gone, with its tasks in
// flight; a gone worker's orphaned tasks say when asynq's lease recovery
// puts them back.
func workersCmd(app *App, g *global) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{Use: "workers", Short: "Worker processes: alive or gone, queues, tasks in flight, orphaned tasks", Args: noArgs,
		RunE: g.withSession(app, nil, func(cmd *cobra.Command, _ []string, s *session) error {
			now := time.Now()
			list, err := inspect.Workers(cmd.Context(), s.rdb, now)
			if err != nil {
				return runtimeErr(err)
			}
			printList(app, asJSON, list, "ID\tSTATE\tHOST\tPID\tVERSION\tQUEUES\tCONCURRENCY\tIN FLIGHT\tSTARTED\tLAST HEARTBEAT\tTASKS",
				func(w io.Writer, wi inspect.WorkerInfo) {
					tprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\t%d\t%d\t%s\t%s ago\t%s\n", clean(wi.ID), wi.State, clean(wi.Host), wi.PID, clean(wi.Version),
						queueList(wi.Queues), wi.Concurrency, len(wi.Tasks), ts(wi.Started),
						(time.Duration(wi.HeartbeatAgeMS) * time.Millisecond).Round(time.Second), workerTasks(wi, now))
				})
			return nil
		})}
	cmd.Flags().BoolVar(&asJSON, "json", false, "JSON Lines, one object per worker")
	return cmd
}

// queueList is "name:priority,…", sorted.
func queueList(qs map[string]int) string {
	out := make([]string, 0, len(qs))
	for q, p := range qs {
		out = append(out, fmt.Sprintf("%s:%d", q, p))
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// workerTasks lists a worker's tasks: "ID (agent, 12s)", and for an
// orphaned one when its lease recovery is due.
func workerTasks(wi inspect.WorkerInfo, now time.Time) string {
	if len(wi.Tasks) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(wi.Tasks))
	for _, t := range wi.Tasks {
		p := fmt.Sprintf("%s (%s, %s)", t.ID, t.Agent, (time.Duration(t.RunningMS) * time.Millisecond).Round(time.Second))
		if t.Orphaned && t.RecoveryFrom != nil {
			p += fmt.Sprintf(" orphaned: recovered in %s–%s", durUntil(now, *t.RecoveryFrom), durUntil(now, *t.RecoveryBy))
		}
		parts = append(parts, p)
	}
	return clean(strings.Join(parts, "; "))
}

// durUntil is how long from now to t, rounded to the second (0s when past).
func durUntil(now, t time.Time) string {
	return max(0, t.Sub(now)).Round(time.Second).String()
}
