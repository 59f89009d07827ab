package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/agentq/agentq/internal/inspect"
)

// tasksOptions are `inspector tasks`'s flags.
type tasksOptions struct {
	filter inspect.TaskFilter
	states string
	asJSON bool
}

// Validate checks the states and the limit before Redis is reached.
func (o *tasksOptions) Validate() error {
	o.filter.States = inspect.ParseStates(o.states)
	if o.filter.Limit < 1 {
		return usageErr("--limit must be within 1..%d", inspect.MaxTaskLimit)
	}
	if err := o.filter.Validate(); err != nil {
		return usageErr("%v", err)
	}
	return nil
}

// NextCursor is the last line of `inspector tasks --json`: the cursor of
// the next page ("" when the listing is complete).
type NextCursor struct {
	NextCursor string `json:"next_cursor"`
}

func tasksCmd(app *App, g *global) *cobra.Command {
	o := &tasksOptions{}
	cmd := &cobra.Command{Use: "tasks", Short: "List waiting and running tasks (filters, a page at a time)", Args: noArgs,
		RunE: g.withSession(app, func([]string) error { return o.Validate() }, func(cmd *cobra.Command, _ []string, s *session) error {
			page, err := inspect.Tasks(cmd.Context(), s.rdb, o.filter)
			if errors.Is(err, inspect.ErrBadCursor) {
				return usageErr("--cursor %q is not a cursor a listing printed", o.filter.Cursor)
			}
			if err != nil {
				return runtimeErr(err)
			}
			if o.asJSON {
				for _, t := range page.Tasks {
					printJSON(app, t)
				}
				printJSON(app, NextCursor{page.NextCursor})
				return nil
			}
			w := table(app)
			fmt.Fprintln(w, "ID\tQUEUE\tLISTED AS\tSTATE\tAGENT\tACTION\tATTEMPTS\tCORRELATION ID\tENQUEUED")
			for _, t := range page.Tasks {
				tprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", t.ID, t.Queue, t.ListedAs, t.State, t.Agent, t.Action,
					t.Attempts, dash(t.CorrelationID), dash(t.EnqueuedAt))
			}
			_ = w.Flush()
			if page.NextCursor != "" {
				tprintf(app.Out, "next page: --cursor %s\n", page.NextCursor)
			} else {
				fmt.Fprintln(app.Out, "(end of the listing)")
			}
			return nil
		})}
	f := cmd.Flags()
	f.StringVar(&o.filter.Queue, "queue", "", "only this queue's tasks")
	f.StringVar(&o.states, "state", "", "only tasks in these states, comma-separated (pending, active, scheduled, retrying, deferred, restarting, waiting)")
	f.StringVar(&o.filter.Agent, "agent", "", "only this agent's tasks")
	f.StringVar(&o.filter.Tenant, "tenant", "", "only this tenant's tasks")
	f.StringVar(&o.filter.CorrelationID, "correlation-id", "", "only tasks with this correlation ID")
	f.IntVar(&o.filter.Limit, "limit", inspect.DefaultTaskLimit, fmt.Sprintf("page size (1..%d)", inspect.MaxTaskLimit))
	f.StringVar(&o.filter.Cursor, "cursor", "", "resume where the previous page stopped (the cursor it printed)")
	f.BoolVar(&o.asJSON, "json", false, "JSON Lines: one task a line, then {\"next_cursor\": …}")
	return cmd
}

// queueCmd is `inspector queue pause|resume NAME`.
func queueCmd(app *App, g *global) *cobra.Command {
	q := &cobra.Command{Use: "queue", Short: "Pause or resume a queue: pause NAME | resume NAME", Args: cobra.ArbitraryArgs, RunE: group}
	q.AddCommand(pauseCmd(app, g, "pause", "Pause a queue: its tasks are held, none starts (running ones run on)", inspect.PauseQueue),
		pauseCmd(app, g, "resume", "Resume a paused queue", inspect.ResumeQueue))
	return q
}

func pauseCmd(app *App, g *global, use, short string, do func(context.Context, redis.UniversalClient, string, []string) (inspect.PauseResult, error)) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{Use: use + " NAME", Short: short,
		RunE: g.withSession(app, func(args []string) error {
			if len(args) != 1 || args[0] == "" {
				return usageErr("%s takes one queue name", use)
			}
			return g.needConfig(app, "inspector queue "+use)
		}, func(cmd *cobra.Command, args []string, s *session) error {
			res, err := do(cmd.Context(), s.rdb, args[0], s.cfg.ServedQueues())
			if err != nil {
				return runtimeErr(err)
			}
			if asJSON {
				printJSON(app, res)
				return nil
			}
			switch {
			case res.Paused && res.Changed:
				tprintf(app.Out, "queue %s paused: its tasks are held until `inspector queue resume %s`\n", res.Queue, res.Queue)
			case res.Paused:
				tprintf(app.Out, "queue %s was already paused\n", res.Queue)
			case res.Changed:
				tprintf(app.Out, "queue %s resumed\n", res.Queue)
			default:
				tprintf(app.Out, "queue %s was not paused\n", res.Queue)
			}
			return nil
		})}
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object")
	return cmd
}
