package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/agentq/agentq/internal/unmatched"
)

// `inspector classify --unmatched`: the recent failed attempts whose
// verdict was weak, as the worker kept them (internal/unmatched).

// The defaults of --since and --limit.
const (
	unmatchedSince = 24 * time.Hour
	unmatchedLimit = 100
)

// teachHint ends the table: what to do with what it lists.
const teachHint = "write a classifier.rules entry for these (docs/semantics.md#teach-the-classifier-classifierrules); " +
	"`inspector classify TEXT` shows what a text gets"

// validateUnmatched checks --unmatched's arguments and flags: no TEXT, and
// none of the flags that describe one.
func (o *classifyOptions) validateUnmatched(args []string) error {
	if len(args) > 0 {
		return usageErr("classify --unmatched takes no TEXT: it lists the failures the workers kept; " +
			"leave --unmatched out to classify a text")
	}
	for _, f := range []string{"status", "header", "exit-code"} {
		if o.changed != nil && o.changed(f) {
			return usageErr("--%s describes a TEXT to classify: it does not go with --unmatched", f)
		}
	}
	if o.since <= 0 {
		return usageErr("--since %s: want a positive duration (e.g. 24h, 30m)", o.since)
	}
	if o.limit < 0 {
		return usageErr("--limit must not be negative")
	}
	return nil
}

// runUnmatched prints the failures o selects at now: JSON Lines, or a
// table and the hint.
func runUnmatched(ctx context.Context, app *App, s *session, o *classifyOptions, now time.Time) error {
	since := now.Add(-o.since)
	list, err := unmatched.NewStore(s.rdb).List(ctx, unmatched.Query{Since: since, Agent: o.agent, Limit: o.limit})
	if err != nil {
		return runtimeErr(err)
	}
	if !o.json && len(list) == 0 {
		fmt.Fprintf(app.Out, "no failed attempt with a weak verdict since %s\n", ts(since))
		return nil
	}
	printList(app, o.json, list, "AT\tAGENT\tTASK\tCLASS\tBY\tERROR", func(w io.Writer, e unmatched.Entry) {
		tprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", ts(e.At), short(e.Agent, 40), short(e.TaskID, 40), clean(e.ErrorClass),
			clean(e.ClassifiedBy), short(firstLine(e.Error), 80))
	})
	if !o.json {
		fmt.Fprintln(app.Out, teachHint)
	}
	return nil
}

// firstLine is s up to its first line break.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
