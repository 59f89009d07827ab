package cli

import (
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentq/agentq/internal/inspect"
)

// tenantsOptions are the options of `inspector tenants`.
type tenantsOptions struct {
	queue  string
	asJSON bool
}

// Validate checks the queue's name, when one is given.
func (o *tenantsOptions) Validate() error {
	if o.queue != "" && clean(o.queue) != o.queue {
		return usageErr("--queue: invalid queue name %q", o.queue)
	}
	return nil
}

// tenantsCmd is `inspector tenants [--queue Q] [--json]`: each tenant of
// each queue (inspect.Tenants) with its runs waiting and in flight, its
// cap and weight (from --config), whether it waits at its cap, and its
// oldest waiting run.
func tenantsCmd(app *App, g *global) *cobra.Command {
	o := &tenantsOptions{}
	cmd := &cobra.Command{Use: "tenants", Short: "Tenants per queue: pending, in flight, cap, weight, capped, oldest waiting", Args: noArgs,
		RunE: g.withSession(app, func([]string) error {
			if err := g.needConfig(app, "inspector tenants"); err != nil {
				return err
			}
			return o.Validate()
		}, func(cmd *cobra.Command, _ []string, s *session) error {
			list, err := inspect.Tenants(cmd.Context(), s.rdb, s.cfg, o.queue)
			if err != nil {
				return runtimeErr(err)
			}
			now := time.Now()
			printList(app, o.asJSON, list, "QUEUE\tTENANT\tPENDING\tIN FLIGHT\tCAP\tWEIGHT\tCAPPED\tOLDEST WAITING",
				func(w io.Writer, t inspect.Tenant) {
					tprintf(w, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", clean(t.Queue), short(tenantName(t.Tenant), 40), t.Pending, t.InFlight,
						capOf(t.Concurrency), strconv.FormatFloat(t.Weight, 'g', -1, 64), yesNo(t.Capped), waitedFor(t.OldestWaiting, now))
				})
			return nil
		})}
	cmd.Flags().StringVar(&o.queue, "queue", "", "only this queue (default: every queue)")
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "JSON Lines, one object per tenant and queue (the default tenant's name is \"\")")
	return cmd
}

func capOf(n int) string {
	if n == 0 {
		return "none"
	}
	return strconv.Itoa(n)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// waitedFor is the age of the oldest waiting run, "-" for none.
func waitedFor(at *time.Time, now time.Time) string {
	if at == nil {
		return "-"
	}
	return max(0, now.Sub(*at)).Round(time.Second).String()
}
