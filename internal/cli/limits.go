package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/inspect"
	"github.com/agentq/agentq/internal/limit"
	"github.com/agentq/agentq/resilience"
)

// LimitRow is one line of `inspector limits --json`: a limits key's
// configuration, fleet-wide usage and pause (limit.Status), and
// the configured agents that use it.
type LimitRow struct {
	limit.Status
	Agents []string `json:"agents"`
}

// listLimits reads every limits key the workers registered or cfg
// configures, sorted by key. A key cfg configures shows cfg's numbers.
func listLimits(ctx context.Context, rdb redis.UniversalClient, cfg *config.Config) ([]LimitRow, error) {
	l := limit.New(rdb)
	keys, err := l.Keys(ctx)
	if err != nil {
		return nil, err
	}
	agents := map[string][]string{}
	confs := map[string]limit.Config{}
	if cfg != nil {
		for _, name := range cfg.AgentNames() {
			a, _ := cfg.Agent(name)
			if a.Limits == nil {
				continue // pause-only keys: below
			}
			k := a.Limits.Key
			if _, ok := confs[k]; !ok {
				confs[k] = limit.Config{Requests: a.Limits.Requests, Tokens: a.Limits.Tokens,
					Per: a.Limits.Per, Concurrency: a.Limits.Concurrency}
			}
			agents[k] = append(agents[k], name)
		}
	}
	// The breaker keys of HTTP and exec agents without limits carry their
	// provider's pauses (inspect.PauseOnlyKeys): listed while paused.
	pauseOnly := map[string]bool{}
	if cfg != nil {
		for k, as := range inspect.PauseOnlyKeys(cfg) {
			agents[k] = append(agents[k], as...)
			sort.Strings(agents[k])
			pauseOnly[k] = true
		}
	}
	seen := map[string]bool{}
	for _, k := range keys {
		seen[k] = true
		delete(pauseOnly, k)
	}
	for k := range confs {
		if !seen[k] {
			keys = append(keys, k)
		}
		delete(pauseOnly, k)
	}
	for k := range pauseOnly {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]LimitRow, 0, len(keys))
	for _, k := range keys {
		st, err := l.Status(ctx, k)
		if err != nil {
			return nil, err
		}
		if pauseOnly[k] && st.PausedUntil == nil {
			continue
		}
		if c, ok := confs[k]; ok {
			st.SetConfig(c)
		}
		as := agents[k]
		if as == nil {
			as = []string{}
		}
		out = append(out, LimitRow{Status: st, Agents: as})
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
	cmd.AddCommand(limitsResume(app, g))
	return cmd
}

// ResumeResult is what `inspector limits resume --json` prints.
type ResumeResult struct {
	Key string `json:"key"`
	// Resumed is true when a pause was in force and is now over.
	Resumed bool `json:"resumed"`
	// PausedUntil and PauseReason are the pause that was cleared (null and
	// "" when none was in force).
	PausedUntil *time.Time `json:"paused_until"`
	PauseReason string     `json:"pause_reason"`
}

// resumeOpts are the options of `limits resume`.
type resumeOpts struct {
	asJSON bool
	force  bool // act on a key no agent uses and no worker registered
}

// Validate checks the flags (none can be wrong today).
func (o *resumeOpts) Validate() error { return nil }

// limitsResume builds `inspector limits resume KEY`: it ends a provider
// pause (paused_until, set from the provider's rate-limit headers) now,
// for every worker of the fleet.
func limitsResume(app *App, g *global) *cobra.Command {
	o := &resumeOpts{}
	cmd := &cobra.Command{Use: "resume KEY", Short: "End a provider pause of a limits key now",
		Long: `Clear the pause (paused_until) of a limits key, which workers set fleet-wide
when a provider's reply says the key is exhausted, so that calls are
admitted again at once. Tasks already deferred for the pause keep their due
time (at most the pause's end). A key that no agent of --config uses (an
HTTP or exec agent without limits uses its breaker key, where its provider's pauses
land) and that no worker registered or paused is refused (exit 1) unless
--force.`,
		Args: exactArgs(1, "one limits key"),
		RunE: g.withSession(app, func([]string) error { return o.Validate() }, func(cmd *cobra.Command, args []string, s *session) error {
			key := args[0]
			l := limit.New(s.rdb)
			if !o.force {
				if err := l.CheckKey(cmd.Context(), key, inspect.LimitKeys(s.cfg)); err != nil {
					if errors.Is(err, resilience.ErrUnknownKey) {
						return runtimeErr(fmt.Errorf("%w; pass --force to use it anyway", err))
					}
					return runtimeErr(err)
				}
			}
			until, reason, err := l.Resume(cmd.Context(), key)
			if err != nil {
				return runtimeErr(err)
			}
			res := ResumeResult{Key: key, Resumed: !until.IsZero(), PauseReason: reason}
			if res.Resumed {
				res.PausedUntil = &until
			}
			switch {
			case o.asJSON:
				printJSON(app, res)
			case res.Resumed:
				fmt.Fprintf(app.Out, "limits %s resumed: cleared the pause until %s (%s)\n", key, until.Format(time.RFC3339), dash(reason))
			default:
				fmt.Fprintf(app.Out, "limits %s was not paused: nothing to clear\n", key)
			}
			return nil
		})}
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print the result as one JSON object")
	cmd.Flags().BoolVar(&o.force, "force", false, "resume a key that no configured agent uses and no worker registered")
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
