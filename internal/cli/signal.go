package cli

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/agentq/agentq/tasks"
)

// signalOptions are `inspector task signal`'s.
type signalOptions struct {
	data string
	json bool
}

// Validate checks the ID, the name and the data before anything connects.
func (o *signalOptions) Validate(args []string) error {
	if len(args) != 2 || args[0] == "" {
		return usageErr("give one task ID and one signal name")
	}
	if o.data != "" && !json.Valid([]byte(o.data)) {
		return usageErr("--data is not JSON")
	}
	if len(o.data) > tasks.MaxSignalBytes {
		return usageErr("--data is %d bytes; at most %d", len(o.data), tasks.MaxSignalBytes)
	}
	return nil
}

func taskSignalCmd(app *App, g *global) *cobra.Command {
	o := &signalOptions{}
	cmd := &cobra.Command{Use: "signal ID NAME [--data JSON]", Short: "Send a signal to a task (a run waiting for it resumes)",
		Long: `Send the signal NAME, with --data (any JSON; none: null), to task ID. The
signal is kept for the task's life: a run waiting for it (its agent
suspended with {"signal":NAME}) resumes now, a run that waits for it later
resumes at once, and every later attempt of the task is handed it. A name
sent already keeps the first (duplicate). A task that has ended or is
unknown is reported and makes the exit status 1.`,
		Args: cobra.ArbitraryArgs,
		RunE: g.withSession(app, o.Validate, func(cmd *cobra.Command, args []string, s *session) error {
			client := tasks.NewClient(s.rdb, s.cfg.ClientOptions()...)
			res, err := client.Signal(cmd.Context(), args[0], args[1], json.RawMessage(o.data))
			if err != nil {
				return runtimeErr(signalError(args[0], err))
			}
			if o.json {
				printJSON(app, res)
				return nil
			}
			w := table(app)
			fmt.Fprintln(w, "ID\tSIGNAL\tSTATE\tRESUMED\tDUPLICATE")
			tprintf(w, "%s\t%s\t%s\t%t\t%t\n", res.ID, res.Name, res.State, res.Resumed, res.Duplicate)
			_ = w.Flush()
			return nil
		})}
	cmd.Flags().StringVar(&o.data, "data", "", "the signal's data (JSON)")
	cmd.Flags().BoolVar(&o.json, "json", false, "one JSON object")
	return cmd
}

// signalError says why a signal to task id failed.
func signalError(id string, err error) error {
	if errors.Is(err, tasks.ErrNotFound) {
		return fmt.Errorf("no task with ID %q (never enqueued, or its history has expired)", id)
	}
	return err
}
