package cli

import (
	"context"
	"fmt"
	"io"
	"sort"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/resilience"
)

// LimitRow is one line of `inspector limits --json`: a limits key's
// configuration, fleet-wide usage and pause (resilience.LimitStatus), and
// the configured agents that use it.
type LimitRow struct {
	resilience.LimitStatus
	Agents []string `json:"agents"`
}

// listLimits reads every limits key the workers registered or cfg
// configures, sorted by key. A key cfg configures shows cfg's numbers.
func listLimits(ctx context.Context, rdb redis.UniversalClient, cfg *config.Config) ([]LimitRow, error) {
	l := resilience.NewLimiter(rdb)
	keys, err := l.Keys(ctx)
	if err != nil {
		return nil, err
	}
	agents := map[string][]string{}
	confs := map[string]resilience.LimitConfig{}
	if cfg != nil {
		for _, name := range cfg.AgentNames() {
			a, _ := cfg.Agent(name)
			if a.Limits == nil {
				continue
			}
			k := a.Limits.Key
			if _, ok := confs[k]; !ok {
				confs[k] = resilience.LimitConfig{Requests: a.Limits.Requests, Tokens: a.Limits.Tokens,
					Per: a.Limits.Per, Concurrency: a.Limits.Concurrency}
			}
			agents[k] = append(agents[k], name)
		}
	}
	seen := map[string]bool{}
	for _, k := range keys {
		seen[k] = true
	}
	for k := range confs {
		if !seen[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	out := make([]LimitRow, 0, len(keys))
	for _, k := range keys {
		st, err := l.Status(ctx, k)
		if err != nil {
			return nil, err
		}
		if c, ok := confs[k]; ok {
			st.SetConfig(c)
		}
		as := agents[k]
		if as == nil {
			as = []string{}
		}
		out = append(out, LimitRow{LimitStatus: st, Agents: as})
	}
	return out, nil
}

func limitsCmd(app *App, g *global) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{Use: "limits", Short: "List provider limits: configuration, usage across the fleet, pauses", Args: noArgs,
		RunE: g.withSession(app, nil, func(cmd *cobra.Command, _ []string, s *session) error {
			rows, err := listLimits(cmd.Context(), s.rdb, s.cfg)
			if err != nil {
				return runtimeErr(err)
			}
			printList(app, asJSON, rows, "KEY\tREQUESTS\tTOKENS\tPER\tIN FLIGHT\tPAUSED UNTIL\tAGENTS",
				func(w io.Writer, r LimitRow) {
					tprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Key,
						usage(r.RequestsInWindow, int64(r.Requests)), usage(r.TokensInWindow, r.Tokens), dash(r.PerText),
						usage(r.InFlight, int64(r.Concurrency)), tsp(r.PausedUntil), dash(joinComma(r.Agents)))
				})
			return nil
		})}
	cmd.Flags().BoolVar(&asJSON, "json", false, "JSON Lines")
	return cmd
}

// usage renders "used/limit", or "used/-" when there is no limit.
func usage(used, limit int64) string {
	if limit <= 0 {
		return fmt.Sprintf("%d/-", used)
	}
	return fmt.Sprintf("%d/%d", used, limit)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func joinComma(ss []string) string {
	out := ""
	for i, s := range ss {
		if i > 0 {
			out += ","
		}
		out += s
	}
	return out
}
