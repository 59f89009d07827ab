package cli

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	totals "github.com/agentq/agentq/internal/usage"
)

// usageOptions are `inspector usage`'s flags.
type usageOptions struct {
	by     string
	since  time.Duration
	asJSON bool
}

func (o *usageOptions) Validate() error {
	if err := totals.ValidBy(o.by); err != nil {
		return usageErr("--by: must be agent, tenant or model, not %q", o.by)
	}
	if o.since <= 0 {
		return usageErr("--since must be a positive duration (e.g. 24h)")
	}
	return nil
}

// usageCmd is `inspector usage [--by agent|tenant|model] [--since 24h]
// [--json]`: the fleet's usage totals (package usage) over the window,
// grouped; they lag the attempts by at most totals.DefaultFlushEvery.
func usageCmd(app *App, g *global) *cobra.Command {
	o := &usageOptions{}
	cmd := &cobra.Command{Use: "usage", Short: "Token usage and cost of the fleet's attempts, by agent, tenant or model, over a window", Args: noArgs,
		RunE: g.withSession(app, func([]string) error { return o.Validate() }, func(cmd *cobra.Command, _ []string, s *session) error {
			r, err := totals.Summarize(cmd.Context(), s.rdb, o.by, o.since, time.Now())
			if err != nil {
				return runtimeErr(err)
			}
			printList(app, o.asJSON, r.Groups, "BY\tKEY\tINPUT\tOUTPUT\tCACHED\tTOTAL\tCOST USD\tATTEMPTS",
				func(w io.Writer, gr totals.Group) {
					tprintf(w, "%s\t%s\t%d\t%d\t%d\t%d\t%s\t%d\n", gr.By, clean(gr.Key), gr.InputTokens, gr.OutputTokens,
						gr.CachedTokens, gr.TotalTokens, usd(gr.CostMicroUSD), gr.Attempts)
				})
			if o.asJSON {
				return nil // budgets: inspector budget --json
			}
			budgets, err := listBudgets(cmd.Context(), s.rdb, s.cfg, nil)
			if err != nil {
				return runtimeErr(err)
			}
			if len(budgets) > 0 {
				fmt.Fprintln(app.Out, "\nbudgets (inspector budget):")
				printBudgets(app, false, budgets)
			}
			return nil
		})}
	cmd.Flags().StringVar(&o.by, "by", "agent", "group by agent, tenant or model")
	cmd.Flags().DurationVar(&o.since, "since", 24*time.Hour, "the window: the hours from this long ago to now")
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "JSON Lines, one object per group")
	return cmd
}

// usd writes micro-dollars as dollars, all six decimals.
func usd(micro int64) string {
	return strconv.FormatFloat(float64(micro)/1e6, 'f', 6, 64)
}
