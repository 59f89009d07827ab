package cli

import (
	"io"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/webhook"
)

// configuredHooks are the config's webhooks with their URLs (no secrets:
// the inspector does not need them).
func configuredHooks(cfg *config.Config) map[string]webhook.Hook {
	out := map[string]webhook.Hook{}
	for _, n := range cfg.WebhookNames() {
		w, _ := cfg.Webhook(n)
		out[n] = webhook.Hook{Name: n, URL: w.URL, Events: w.Events, Timeout: w.Timeout, MaxAge: w.MaxAge}
	}
	return out
}

// webhooksCmd is `inspector webhooks [--json]` and `inspector webhooks
// retry NAME`.
func webhooksCmd(app *App, g *global) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{Use: "webhooks | webhooks retry NAME", Short: "Webhook deliveries per webhook: pending, failing, given up, last error, next try",
		Args: noArgs,
		RunE: g.withSession(app, nil, func(cmd *cobra.Command, _ []string, s *session) error {
			list, err := webhook.Statuses(cmd.Context(), s.rdb, configuredHooks(s.cfg))
			if err != nil {
				return runtimeErr(err)
			}
			printList(app, asJSON, list, "NAME\tURL\tPENDING\tFAILING\tGIVEN UP\tNEXT TRY\tLAST OK\tLAST ERROR AT\tLAST ERROR",
				func(w io.Writer, st webhook.Status) {
					tprintf(w, "%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", st.Name, orDash(st.URL), st.Pending, st.Failing, st.GivenUp,
						ts(st.NextTry), ts(st.LastOKAt), ts(st.LastErrorAt), orDash(short(st.LastError, 120)))
				})
			return nil
		})}
	cmd.Flags().BoolVar(&asJSON, "json", false, "JSON Lines")
	cmd.AddCommand(webhooksRetryCmd(app, g))
	return cmd
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// webhooksRetryCmd is `inspector webhooks retry NAME`: every pending or
// given-up delivery to NAME is tried now.
func webhooksRetryCmd(app *App, g *global) *cobra.Command {
	return &cobra.Command{Use: "retry NAME", Short: "Try every pending or given-up delivery to a webhook now (a given-up one gets a fresh max_age)",
		Args: exactArgs(1, "one webhook name"),
		RunE: g.withSession(app, nil, func(cmd *cobra.Command, args []string, s *session) error {
			if err := s.cfg.CheckNotify(args[:1]); err != nil {
				// Not configured (no --config, or another one): a webhook
				// Redis has deliveries to is known too, as `inspector
				// webhooks` lists it; any other name is most likely a typo.
				list, lerr := webhook.Statuses(cmd.Context(), s.rdb, nil)
				if lerr != nil {
					return runtimeErr(lerr)
				}
				if !slices.ContainsFunc(list, func(st webhook.Status) bool { return st.Name == args[0] }) {
					return usageErr("unknown webhook %q: neither in the config nor with deliveries in Redis (%v)", args[0], err)
				}
			}
			n, err := webhook.Retry(cmd.Context(), s.rdb, args[0], time.Now())
			if err != nil {
				return runtimeErr(err)
			}
			tprintf(app.Out, "webhook %s: %d deliveries due now\n", args[0], n)
			return nil
		})}
}
