package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/budget"
	"github.com/agentq/agentq/internal/inspect"
)

// listBudgets reads the state of every budget cfg sets, and of the
// tenants the config does not name that spent against
// defaults.tenant.budget in its window (inspect.FleetBudgetStatuses;
// tenants adds more such tenants, shown even when untouched).
func listBudgets(ctx context.Context, rdb redis.UniversalClient, cfg *config.Config, tenants []string) ([]budget.Status, error) {
	return inspect.FleetBudgetStatuses(ctx, rdb, budget.New(rdb), cfg, time.Now(), tenants...)
}

// printBudgets writes budgets as a table, or JSON Lines.
func printBudgets(app *App, asJSON bool, rows []budget.Status) {
	printList(app, asJSON, rows, "KIND\tNAME\tTOKENS USED\tUSD USED\tPER\tLEFT\tRESETS IN",
		func(w io.Writer, st budget.Status) {
			left := fmt.Sprintf("%d tokens", st.TokensLeft)
			if st.Tokens == 0 {
				left = fmt.Sprintf("$%.6f", st.USDLeft)
			} else if st.USD > 0 {
				left += fmt.Sprintf(", $%.6f", st.USDLeft)
			}
			resets := "-"
			if st.Exhausted {
				resets = st.ResetsIn.Round(time.Second).String()
			}
			tprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", st.Kind, dash(clean(st.Name)), usage(st.TokensUsed, st.Tokens),
				fmt.Sprintf("%.6f/%s", st.USDUsed, dash(usdLimit(st.USD))), st.Per, left, resets)
		})
}

func usdLimit(usd float64) string {
	if usd <= 0 {
		return ""
	}
	return fmt.Sprintf("%g", usd)
}

// budgetOptions are `inspector budget`'s flags.
type budgetOptions struct {
	asJSON  bool
	tenants []string
}

func (o *budgetOptions) Validate() error { return nil }

// budgetCmd is `inspector budget [--tenant T]… [--json]`: every budget the
// config sets, what its window used and has left, and when an exhausted
// one has room again; `inspector budget reset KIND NAME` forgets one.
func budgetCmd(app *App, g *global) *cobra.Command {
	o := &budgetOptions{}
	cmd := &cobra.Command{Use: "budget", Short: "List the tenants' and agents' budgets: used, left, when they reset", Args: noArgs,
		RunE: g.withSession(app, func([]string) error {
			if err := g.needConfig(app, "inspector budget"); err != nil {
				return err
			}
			return o.Validate()
		}, func(cmd *cobra.Command, _ []string, s *session) error {
			rows, err := listBudgets(cmd.Context(), s.rdb, s.cfg, o.tenants)
			if err != nil {
				return runtimeErr(err)
			}
			printBudgets(app, o.asJSON, rows)
			return nil
		})}
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "JSON Lines, one object per budget")
	cmd.Flags().StringSliceVar(&o.tenants, "tenant", nil, "also show this tenant's budget (a tenant the config does not name, under defaults.tenant.budget); repeatable")
	cmd.AddCommand(budgetReset(app, g))
	return cmd
}

// budgetResetOptions are `inspector budget reset`'s flags.
type budgetResetOptions struct {
	asJSON, force bool
}

func (o *budgetResetOptions) Validate() error { return nil }

// BudgetResetResult is what `inspector budget reset --json` prints.
type BudgetResetResult struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Before is the budget's state before the reset (null when the config
	// sets no such budget and --force was given).
	Before *budget.Status `json:"before"`
}

// budgetReset is `inspector budget reset KIND NAME`: an emergency
// override that forgets the debits of a budget's window, fleet-wide.
func budgetReset(app *App, g *global) *cobra.Command {
	o := &budgetResetOptions{}
	cmd := &cobra.Command{Use: "reset KIND NAME", Short: "Forget the debits of a tenant's or agent's budget window (emergencies)",
		Long: `Forget what the window of a budget has used, for every worker of the fleet:
KIND is tenant or agent, NAME the tenant ("" for the default tenant) or the
agent. Tasks waiting for the budget start at their next look, within a
minute. A budget the config (--config) does not set is refused (exit 2)
unless --force.`,
		Args: exactArgs(2, "KIND (tenant or agent) and NAME"),
		RunE: g.withSession(app, func(args []string) error {
			if _, err := budget.ParseKind(args[0]); err != nil {
				return usageErr("%v", err)
			}
			return o.Validate()
		}, func(cmd *cobra.Command, args []string, s *session) error {
			kind, _ := budget.ParseKind(args[0])
			name := args[1]
			res := BudgetResetResult{Kind: string(kind), Name: name}
			b := inspect.ConfiguredBudget(s.cfg, kind, name)
			if b == nil && !o.force {
				return usageErr("the config sets no budget for %s %q; pass --force to reset it anyway", kind, name)
			}
			k := budget.New(s.rdb)
			if b != nil {
				st, err := k.Status(cmd.Context(), *b)
				if err != nil {
					return runtimeErr(err)
				}
				res.Before = &st
			}
			if err := k.Reset(cmd.Context(), kind, name); err != nil {
				return runtimeErr(err)
			}
			if o.asJSON {
				printJSON(app, res)
				return nil
			}
			fmt.Fprintf(app.Out, "budget %s %q reset: its window's debits are forgotten\n", kind, name)
			return nil
		})}
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print the result as one JSON object")
	cmd.Flags().BoolVar(&o.force, "force", false, "reset a budget the config does not set")
	return cmd
}
