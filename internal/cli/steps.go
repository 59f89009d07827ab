package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/tasks"
)

// TaskSteps is `inspector task steps --json`'s object: the task's recorded
// steps, name → data, as the agent's next ActionRequest carries them.
type TaskSteps struct {
	ID    string                     `json:"id"`
	Steps map[string]json.RawMessage `json:"steps"`
}

// stepPreview is how many characters of a step's data the table shows.
const stepPreview = 60

func taskStepsCmd(app *App, g *global) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{Use: "steps ID", Short: "Print the steps a task's agents recorded (their data, as the next attempt gets them)",
		Args: exactArgs(1, "one task ID"),
		RunE: g.withSession(app, nil, func(cmd *cobra.Command, args []string, s *session) error {
			id := args[0]
			v, err := tasks.NewStore(s.rdb).Get(cmd.Context(), id)
			if errors.Is(err, tasks.ErrNotFound) {
				return runtimeErr(fmt.Errorf("no task with ID %q (never enqueued, or its history has expired)", id))
			}
			if err != nil {
				return runtimeErr(err)
			}
			steps, err := record.NewStore(s.rdb).Steps(cmd.Context(), id)
			if err != nil {
				return runtimeErr(err)
			}
			if asJSON {
				printJSON(app, TaskSteps{ID: id, Steps: steps})
				return nil
			}
			printSteps(app, v.History, steps)
			return nil
		})}
	cmd.Flags().BoolVar(&asJSON, "json", false, `one JSON object {"id", "steps": {name: data}}`)
	return cmd
}

// printSteps prints the steps as a table in the order they were recorded
// (their history events; a step whose event was elided from a long
// history comes last, by name), each with its attempt, size, tokens and
// the start of its data.
func printSteps(app *App, h []tasks.Event, steps map[string]json.RawMessage) {
	w := table(app)
	fmt.Fprintln(w, "NAME\tATTEMPT\tBYTES\tTOKENS\tDATA")
	shown := map[string]bool{}
	for _, ev := range h {
		data, ok := steps[ev.Name]
		if ev.Event != tasks.EventStep || !ok || shown[ev.Name] {
			continue
		}
		shown[ev.Name] = true
		tokens := "-"
		if ev.Usage != nil {
			tokens = fmt.Sprint(ev.Usage.TotalTokens)
		}
		tprintf(w, "%s\t%d\t%d\t%s\t%s\n", ev.Name, ev.Attempt, len(data), tokens, preview(data))
	}
	var rest []string
	for name := range steps {
		if !shown[name] {
			rest = append(rest, name)
		}
	}
	slices.Sort(rest)
	for _, name := range rest {
		tprintf(w, "%s\t-\t%d\t-\t%s\n", name, len(steps[name]), preview(steps[name]))
	}
	_ = w.Flush()
}

// preview is the start of a step's data, cut at stepPreview characters.
func preview(data json.RawMessage) string {
	r := []rune(string(data))
	if len(r) > stepPreview {
		return string(r[:stepPreview-1]) + "…"
	}
	return string(r)
}
