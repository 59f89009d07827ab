package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/durx"
	"github.com/agentq/agentq/internal/inspect"
	"github.com/agentq/agentq/internal/restart"
	agentusage "github.com/agentq/agentq/internal/usage"
	"github.com/agentq/agentq/resilience"
	"github.com/agentq/agentq/tasks"
)

// NewInspectorCmd builds the `inspector` command tree.
func NewInspectorCmd(app *App) *cobra.Command {
	g := &global{}
	root := newRoot(app, "inspector", "Inspect dead letters, breakers, tasks and queues", g)
	root.Args = cobra.ArbitraryArgs
	root.RunE = group
	dlq := &cobra.Command{Use: "dlq", Short: "Dead letters: list, show, requeue, delete, purge, export", Args: cobra.ArbitraryArgs, RunE: group}
	dlq.AddCommand(dlqList(app, g), dlqShow(app, g), dlqRequeue(app, g), dlqDelete(app, g), dlqPurge(app, g), dlqExport(app, g))
	breaker := &cobra.Command{Use: "breaker", Short: "Change a breaker: reset KEY | trip KEY --for DUR", Args: cobra.ArbitraryArgs, RunE: group}
	breaker.AddCommand(breakerReset(app, g), breakerTrip(app, g))
	root.AddCommand(dlq, breaker, breakersCmd(app, g), limitsCmd(app, g), taskCmd(app, g), restartsCmd(app, g), statsCmd(app, g),
		classifyCmd(app, g), webhooksCmd(app, g), workersCmd(app, g), tasksCmd(app, g), queueCmd(app, g), tenantsCmd(app, g), schedulesCmd(app, g),
		usageCmd(app, g), budgetCmd(app, g))
	return root
}

// group is the RunE of a command that only groups subcommands.
func group(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageErr("unknown command %q for %q (see %s --help)", args[0], cmd.CommandPath(), cmd.CommandPath())
	}
	return usageErr("missing subcommand (see %s --help)", cmd.CommandPath())
}

// session is what an inspector command works with.
type session struct {
	rdb redis.UniversalClient
	dlq *deadletter.Store
	// cfg is the loaded config (history.retention for the records a
	// requeue writes, redis.wait_replicas for its enqueue).
	cfg *config.Config
}

func (g *global) session(ctx context.Context, app *App) (*session, error) {
	cfg, rdb, err := g.connect(ctx, app)
	if err != nil {
		return nil, err
	}
	return &session{rdb: rdb, dlq: deadletter.NewStore(rdb), cfg: cfg}, nil
}

func (s *session) close() { _ = s.rdb.Close() }

// withSession is the RunE of an inspector command: it checks the command's
// options with validate (nil: none) before it connects, so bad usage never
// waits for Redis, then runs fn with a session it closes after.
func (g *global) withSession(app *App, validate func(args []string) error,
	fn func(cmd *cobra.Command, args []string, s *session) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if validate != nil {
			if err := validate(args); err != nil {
				return err
			}
		}
		s, err := g.session(cmd.Context(), app)
		if err != nil {
			return err
		}
		defer s.close()
		return fn(cmd, args, s)
	}
}

// printList prints items as JSON Lines (asJSON), or as a table: header,
// then one row per item.
func printList[T any](app *App, asJSON bool, items []T, header string, row func(w io.Writer, item T)) {
	if asJSON {
		for _, it := range items {
			printJSON(app, it)
		}
		return
	}
	w := table(app)
	fmt.Fprintln(w, header)
	for _, it := range items {
		row(w, it)
	}
	_ = w.Flush()
}

func table(app *App) *tabwriter.Writer { return tabwriter.NewWriter(app.Out, 0, 4, 2, ' ', 0) }

func ts(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func tsp(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return ts(*t)
}

// short is s on one line (newlines and tabs as spaces), clean'd, cut to
// n bytes on a rune boundary.
func short(s string, n int) string {
	s = clean(strings.ReplaceAll(strings.ReplaceAll(s, "\n", " "), "\t", " "))
	if len(s) > n {
		cut := n - 1
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return s[:cut] + "…"
	}
	return s
}

type listOptions struct {
	agent, class  string
	limit, offset int
	json          bool
}

func (o *listOptions) Validate() error {
	if o.class != "" {
		if _, err := resilience.ParseClass(o.class); err != nil {
			return usageErr("--class: %v", err)
		}
	}
	if o.limit < 0 || o.offset < 0 {
		return usageErr("--limit and --offset must not be negative")
	}
	return nil
}

func (o *listOptions) filter() deadletter.Filter {
	return deadletter.Filter{Agent: o.agent, Class: o.class, Limit: o.limit, Offset: o.offset}
}

func dlqList(app *App, g *global) *cobra.Command {
	o := &listOptions{}
	cmd := &cobra.Command{Use: "list", Short: "List dead letters, newest first", Args: noArgs,
		RunE: g.withSession(app, func([]string) error { return o.Validate() }, func(cmd *cobra.Command, _ []string, s *session) error {
			entries, total, err := s.dlq.List(cmd.Context(), o.filter())
			if err != nil {
				return runtimeErr(err)
			}
			printList(app, o.json, entries, "ID\tAGENT\tACTION\tCLASS\tREASON\tATTEMPTS\tRESTARTS\tDEAD LETTERED\tERROR",
				func(w io.Writer, e *deadletter.Entry) {
					tprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", e.ID, e.Agent, e.Action, e.ErrorClass, e.Reason,
						e.Attempts, e.Restarts, ts(e.DeadLetteredAt), short(e.Error, 60))
				})
			if !o.json {
				tprintf(app.Out, "%d of %d dead letters\n", len(entries), total)
			}
			return nil
		})}
	cmd.Flags().StringVar(&o.agent, "agent", "", "only this agent's")
	cmd.Flags().StringVar(&o.class, "class", "", "only this error class")
	cmd.Flags().IntVar(&o.limit, "limit", 100, "page size")
	cmd.Flags().IntVar(&o.offset, "offset", 0, "skip this many")
	cmd.Flags().BoolVar(&o.json, "json", false, "JSON Lines")
	return cmd
}

func dlqShow(app *App, g *global) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{Use: "show ID", Short: "Show one dead letter with its history", Args: exactArgs(1, "one dead-letter ID"),
		RunE: g.withSession(app, nil, func(cmd *cobra.Command, args []string, s *session) error {
			e, err := s.dlq.Get(cmd.Context(), args[0])
			if errors.Is(err, deadletter.ErrNotFound) {
				return runtimeErr(fmt.Errorf("no dead letter with ID %q", args[0]))
			}
			if err != nil {
				return runtimeErr(err)
			}
			if asJSON {
				printJSON(app, e)
				return nil
			}
			w := table(app)
			tprintf(w, "ID:\t%s\nAgent:\t%s\nAction:\t%s\nQueue:\t%s\nCorrelation ID:\t%s\nClass:\t%s\nReason:\t%s\nAttempts:\t%d\nRestarts:\t%d\nRun:\t%d\nDead-lettered:\t%s\nError:\t%s\nParams:\t%s\n",
				e.ID, e.Agent, e.Action, e.Queue, e.CorrelationID, e.ErrorClass, e.Reason, e.Attempts, e.Restarts, e.Run,
				ts(e.DeadLetteredAt), e.Error, string(e.Params))
			_ = w.Flush()
			fmt.Fprintln(app.Out, "History:")
			printHistory(app, e.History)
			return nil
		})}
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object")
	return cmd
}

func printHistory(app *App, h []tasks.Event) {
	w := table(app)
	// A TOKENS column (input/output, and the cost when priced) only when
	// an event reported usage.
	used := slices.ContainsFunc(h, func(ev tasks.Event) bool { return ev.Usage != nil })
	// The cell's text only: tprintf escapes a tab inside an argument (it
	// would show as \t), so the column's tab is in the format.
	tokens := func(ev tasks.Event) string {
		switch {
		case ev.Usage == nil:
			return "-"
		case ev.Usage.Priced:
			return fmt.Sprintf("%d/%d $%s", ev.Usage.InputTokens, ev.Usage.OutputTokens, costText(ev.Usage.CostUSD))
		}
		return fmt.Sprintf("%d/%d", ev.Usage.InputTokens, ev.Usage.OutputTokens)
	}
	head := "  AT\tEVENT\tATTEMPT\tRESTART\tCLASS\tDELAY\t"
	row := "  %s\t%s\t%d\t%d\t%s\t%s\t%s\n"
	if used {
		head += "TOKENS (IN/OUT)\t"
		row = "  %s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n"
	}
	fmt.Fprintln(w, head+"ERROR")
	for _, ev := range h {
		delay := "-"
		if ev.DelayMS > 0 {
			delay = durx.Millis(ev.DelayMS).String()
		}
		name := eventName(ev)
		args := []any{ev.At.UTC().Format("2006-01-02T15:04:05.000Z"), name, ev.Attempt, ev.Restart, ev.ErrorClass, delay}
		if used {
			args = append(args, tokens(ev))
		}
		tprintf(w, row, append(args, short(ev.Error, 70))...)
	}
	_ = w.Flush()
}

// usageText is a task's usage as the inspector shows it: its tokens, and
// its cost when priced.
func usageText(u agentusage.Usage) string {
	s := fmt.Sprintf("%d input (%d cached), %d output, %d total tokens", u.InputTokens, u.CachedTokens, u.OutputTokens, u.TotalTokens)
	if u.Priced {
		return s + ", $" + costText(u.CostUSD)
	}
	return s + " (no price for its model)"
}

// costText is a cost in USD to the millionth of a dollar.
func costText(usd float64) string { return strconv.FormatFloat(usd, 'f', 6, 64) }

type requeueOptions struct {
	all          bool
	agent, class string
	// run is the run the dead letter must be at (--run), or
	// deadletter.AnyRun.
	run int
	// fresh deletes the tasks' steps first (--fresh).
	fresh bool
}

// opts are the requeue's options for the deadletter store.
func (o *requeueOptions) opts() []deadletter.RequeueOption {
	if o.fresh {
		return []deadletter.RequeueOption{deadletter.Fresh()}
	}
	return nil
}

func (o *requeueOptions) Validate(args []string) error {
	if o.all == (len(args) > 0) {
		return usageErr("give dead-letter IDs or --all (not both)")
	}
	if o.run != deadletter.AnyRun && (o.run < 0 || len(args) != 1) {
		return usageErr("--run goes with one dead-letter ID and is at least 0")
	}
	if !o.all && (o.agent != "" || o.class != "") {
		return usageErr("--agent and --class go with --all")
	}
	if o.class != "" {
		if _, err := resilience.ParseClass(o.class); err != nil {
			return usageErr("--class: %v", err)
		}
	}
	return nil
}

func dlqRequeue(app *App, g *global) *cobra.Command {
	o := &requeueOptions{}
	cmd := &cobra.Command{Use: "requeue ID...|--all", Short: "Run dead letters again with a fresh budget (history kept)",
		Long: `Requeue each dead letter as a fresh run of its task (a new attempt and
restart budget, the same parameters, the history kept). Of concurrent
requeues of one dead letter (this command, the console, the HTTP API)
exactly one requeues it; the others are refused (exit 1: gone, or being
requeued) and write nothing. --run N, with one ID, requeues it only if it
is still run N (the Run that dlq show printed): once the task was requeued
and dead-lettered again, a late requeue is refused. The steps the task's
agents recorded are kept (the new run skips their work); --fresh deletes
them first.`,
		RunE: g.withSession(app, o.Validate, func(cmd *cobra.Command, args []string, s *session) error {
			ids := args
			if o.all {
				var err error
				ids, err = s.dlq.IDs(cmd.Context(), deadletter.Filter{Agent: o.agent, Class: o.class})
				if err != nil {
					return runtimeErr(err)
				}
			}
			client := tasks.NewClient(s.rdb, s.cfg.ClientOptions()...)
			if o.run != deadletter.AnyRun {
				if _, err := s.dlq.RequeueTaskRun(cmd.Context(), client, ids[0], o.run, o.opts()...); err != nil {
					return runtimeErr(err)
				}
				tprintf(app.Out, "%s\n", ids[0])
				return nil
			}
			_, failed, err := s.dlq.RequeueIDs(cmd.Context(), client, ids, func(id string, err error) {
				if err != nil {
					tprintf(app.Err, "inspector: requeue %s: %v\n", id, err)
					return
				}
				tprintf(app.Out, "%s\n", id)
			}, o.opts()...)
			if err != nil {
				return runtimeErr(err)
			}
			if failed > 0 {
				return runtimeErr(fmt.Errorf("%d of %d dead letters not requeued", failed, len(ids)))
			}
			return nil
		})}
	cmd.Flags().BoolVar(&o.all, "all", false, "every dead letter (narrow with --agent, --class)")
	cmd.Flags().StringVar(&o.agent, "agent", "", "with --all: only this agent's")
	cmd.Flags().StringVar(&o.class, "class", "", "with --all: only this class")
	cmd.Flags().BoolVar(&o.fresh, "fresh", false, "delete the tasks' recorded steps first: the new run starts afresh")
	cmd.Flags().IntVar(&o.run, "run", deadletter.AnyRun, "with one ID: requeue it only if it is this run (the one you looked at); another run is refused")
	return cmd
}

func dlqDelete(app *App, g *global) *cobra.Command {
	return &cobra.Command{Use: "delete ID...", Short: "Delete dead letters",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageErr("give at least one dead-letter ID")
			}
			return nil
		},
		RunE: g.withSession(app, nil, func(cmd *cobra.Command, args []string, s *session) error {
			n, err := s.dlq.Delete(cmd.Context(), args...)
			if err != nil {
				return runtimeErr(err)
			}
			tprintf(app.Out, "deleted %d of %d\n", n, len(args))
			if n < len(args) {
				return runtimeErr(fmt.Errorf("%d of the IDs were not dead letters", len(args)-n))
			}
			return nil
		})}
}

func dlqPurge(app *App, g *global) *cobra.Command {
	var yes bool
	cmd := &cobra.Command{Use: "purge --yes", Short: "Delete every dead letter", Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !yes {
				return usageErr("purge deletes every dead letter: confirm with --yes")
			}
			s, err := g.session(cmd.Context(), app)
			if err != nil {
				return err
			}
			defer s.close()
			n, err := s.dlq.Purge(cmd.Context())
			if err != nil {
				return runtimeErr(err)
			}
			tprintf(app.Out, "purged %d dead letters\n", n)
			return nil
		}}
	cmd.Flags().BoolVar(&yes, "yes", false, "really delete them all")
	return cmd
}

func dlqExport(app *App, g *global) *cobra.Command {
	o := &listOptions{}
	cmd := &cobra.Command{Use: "export", Short: "Write every dead letter as JSON Lines to standard output", Args: noArgs,
		RunE: g.withSession(app, func([]string) error { return o.Validate() }, func(cmd *cobra.Command, _ []string, s *session) error {
			n, err := s.dlq.Export(cmd.Context(), jsonLines{app.Out}, o.filter())
			if err != nil {
				return runtimeErr(err)
			}
			tprintf(app.Err, "exported %d dead letters\n", n)
			return nil
		})}
	cmd.Flags().StringVar(&o.agent, "agent", "", "only this agent's")
	cmd.Flags().StringVar(&o.class, "class", "", "only this error class")
	return cmd
}

func breakersCmd(app *App, g *global) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{Use: "breakers", Short: "List circuit breakers and agent health", Args: noArgs,
		RunE: g.withSession(app, nil, func(cmd *cobra.Command, _ []string, s *session) error {
			list, err := breaker.New(s.rdb).List(cmd.Context())
			if err != nil {
				return runtimeErr(err)
			}
			// WINDOW FAIL/CALLS and FAILING TASKS: rate mode's sliding window.
			printList(app, asJSON, list, "KEY\tSTATE\tHEALTH\tCONSEC FAIL\tWINDOW FAIL/CALLS\tFAILING TASKS\tFAILURES\tSUCCESSES\tOPEN UNTIL\tLAST FAILURE\tLAST SUCCESS",
				func(w io.Writer, b breaker.Snapshot) {
					tprintf(w, "%s\t%s\t%s\t%d\t%d/%d\t%d\t%d\t%d\t%s\t%s\t%s\n", b.Key, b.State, b.Health, b.ConsecutiveFailures,
						b.WindowFailures, b.WindowCalls, b.FailingTasks,
						b.FailureCount, b.SuccessCount, tsp(b.OpenUntil), tsp(b.LastFailureAt), tsp(b.LastSuccessAt))
				})
			return nil
		})}
	cmd.Flags().BoolVar(&asJSON, "json", false, "JSON Lines")
	return cmd
}

// breakerOpts are the options of `breaker reset` and `breaker trip`.
type breakerOpts struct {
	trip  bool
	d     time.Duration // trip: how long it stays open
	force bool          // act on a key no agent uses and Redis does not know
}

// Validate checks the flags before Redis is touched.
func (o *breakerOpts) Validate() error {
	if o.trip && o.d <= 0 {
		return usageErr("--for is required and must be positive (e.g. --for 10m)")
	}
	return nil
}

// checkBreakerKey refuses (exit 1) a key that no agent of the config uses
// and that Redis has no breaker for, unless --force: a typo would
// otherwise leave a phantom breaker for ever.
func checkBreakerKey(ctx context.Context, s *session, b *breaker.Breakers, key string, force bool) error {
	if force {
		return nil
	}
	if err := b.CheckKey(ctx, key, inspect.BreakerKeys(s.cfg)); err != nil {
		if errors.Is(err, resilience.ErrUnknownKey) {
			return runtimeErr(fmt.Errorf("%w; pass --force to use it anyway", err))
		}
		return runtimeErr(err)
	}
	return nil
}

func breakerReset(app *App, g *global) *cobra.Command {
	o := &breakerOpts{}
	cmd := &cobra.Command{Use: "reset KEY", Short: "Close a breaker now", Args: exactArgs(1, "one breaker key"),
		RunE: g.withSession(app, func([]string) error { return o.Validate() }, func(cmd *cobra.Command, args []string, s *session) error {
			b := breaker.New(s.rdb)
			if err := checkBreakerKey(cmd.Context(), s, b, args[0], o.force); err != nil {
				return err
			}
			if err := b.Reset(cmd.Context(), args[0]); err != nil {
				return runtimeErr(err)
			}
			tprintf(app.Out, "breaker %s reset (closed)\n", args[0])
			return nil
		})}
	cmd.Flags().BoolVar(&o.force, "force", false, "reset a key that no configured agent uses and Redis has no breaker for")
	return cmd
}

func breakerTrip(app *App, g *global) *cobra.Command {
	o := &breakerOpts{trip: true}
	cmd := &cobra.Command{Use: "trip KEY --for DUR", Short: "Open a breaker for a while (manual override)", Args: exactArgs(1, "one breaker key"),
		RunE: g.withSession(app, func([]string) error { return o.Validate() }, func(cmd *cobra.Command, args []string, s *session) error {
			b := breaker.New(s.rdb)
			if err := checkBreakerKey(cmd.Context(), s, b, args[0], o.force); err != nil {
				return err
			}
			if err := b.Trip(cmd.Context(), args[0], o.d); err != nil {
				return runtimeErr(err)
			}
			tprintf(app.Out, "breaker %s tripped (open) for %s\n", args[0], o.d)
			return nil
		})}
	cmd.Flags().DurationVar(&o.d, "for", 0, "how long it stays open")
	cmd.Flags().BoolVar(&o.force, "force", false, "trip a key that no configured agent uses and Redis has no breaker for (it stays listed for ever)")
	return cmd
}

func taskCmd(app *App, g *global) *cobra.Command {
	var asJSON, follow, tree bool
	cmd := &cobra.Command{Use: "task ID [--follow | --tree] | task cancel ID... | task steps ID | task signal ID NAME", Short: "Show a task's state and history (--follow: its events as they happen; --tree: its run tree); cancel tasks; print its steps; signal a task", Args: exactArgs(1, "one task ID"),
		RunE: g.withSession(app, func([]string) error {
			if follow && tree {
				return usageErr("--follow and --tree do not go together")
			}
			return nil
		}, func(cmd *cobra.Command, args []string, s *session) error {
			if follow {
				return followTask(cmd.Context(), app, s.rdb, args[0], asJSON)
			}
			if tree {
				return printTree(cmd.Context(), app, s, args[0], asJSON)
			}
			v, err := tasks.NewStore(s.rdb).Get(cmd.Context(), args[0])
			if errors.Is(err, tasks.ErrNotFound) {
				return runtimeErr(fmt.Errorf("no task with ID %q (never enqueued, or its history has expired)", args[0]))
			}
			if err != nil {
				return runtimeErr(err)
			}
			if asJSON {
				printJSON(app, v)
				return nil
			}
			printTask(app, v)
			return nil
		})}
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object (with --follow: one JSON line per event)")
	cmd.Flags().BoolVar(&follow, "follow", false, "print the task's events (from the first) as they are recorded, one line each, until it ends")
	cmd.Flags().BoolVar(&tree, "tree", false, "print the task's run tree: it and its children (of each task's last children wait), with each one's state and cost")
	cmd.AddCommand(taskCancelCmd(app, g), taskStepsCmd(app, g), taskSignalCmd(app, g))
	return cmd
}

// printTask is `inspector task ID`'s table: what holds the task and when
// its next attempt is due first, then the record; the error of a task that
// has not ended is the last error, of an earlier attempt, not why the task
// waits (labelled so).
func printTask(app *App, v *tasks.View) {
	w := table(app)
	tprintf(w, "ID:\t%s\nState:\t%s\n", v.ID, v.State)
	if v.WaitingFor != "" {
		tprintf(w, "Waiting for:\t%s — %s\n", v.WaitingFor, v.WaitingDetail)
	}
	if v.NextAttemptAt != "" {
		tprintf(w, "Next attempt at:\t%s\n", v.NextAttemptAt)
	}
	tprintf(w, "Agent:\t%s\nAction:\t%s\nAttempts:\t%d\nRestarts:\t%d\n", v.Agent, v.Action, v.Attempts, v.Restarts)
	tprintf(w, "Tenant:\t%s\nPriority:\t%s\n", tenantName(v.Tenant), tasks.PriorityOf(v.Priority))
	if v.ErrorClass != "" {
		printError(w, v)
	}
	if v.State == tasks.StateCanceled {
		tprintf(w, "Canceled:\t%s\nReason:\t%s\n", v.CanceledAt, v.CancelReason)
	}
	if v.Usage != nil {
		tprintf(w, "Usage:\t%s\n", usageText(*v.Usage))
	}
	if v.Steps > 0 {
		tprintf(w, "Steps:\t%d\n", v.Steps)
	}
	if v.Resumes > 0 || v.Signals > 0 {
		tprintf(w, "Resumes:\t%d\nWait:\t%s\nSignals:\t%d\n", v.Resumes, v.Wait, v.Signals)
	}
	_ = w.Flush()
	fmt.Fprintln(app.Out, "History:")
	printHistory(app, v.History)
}

// printError prints v's error class and error: an ended task's as its
// error, a task's that has not ended as its last error, of its attempt.
func printError(w io.Writer, v *tasks.View) {
	class, label := "Class", "Error"
	if !v.State.Terminal() {
		class, label = "Last error class", fmt.Sprintf("Last error (attempt %d)", v.Attempts)
	}
	tprintf(w, "%s:\t%s\n", class, v.ErrorClass)
	if v.ClassifiedBy != "" {
		tprintf(w, "Classified by:\t%s\n", v.ClassifiedBy)
	}
	tprintf(w, "%s:\t%s\n", label, v.Error)
}

// eventName is how a history table names ev: its kind, with a step's or
// signal's name and size, a suspend's wait, a resume's cause.
func eventName(ev tasks.Event) string {
	switch ev.Event {
	case tasks.EventStep, tasks.EventSignal:
		return fmt.Sprintf("%s %s (%d B)", ev.Event, ev.Name, ev.Bytes)
	case tasks.EventWaiting:
		return fmt.Sprintf("waiting %s", ev.Wait)
	case tasks.EventResumed:
		return fmt.Sprintf("resumed #%d by %s", ev.Resume, ev.By)
	}
	return ev.Event
}

// tenantName is how the inspector's tables show a task's tenant: the
// default tenant ("") as "(default)".
func tenantName(tenant string) string {
	if tenant == "" {
		return "(default)"
	}
	return tenant
}

// cancelOptions are `inspector task cancel`'s.
type cancelOptions struct {
	reason string
	json   bool
}

// Validate checks the IDs and the reason before anything connects.
func (o *cancelOptions) Validate(args []string) error {
	if len(args) == 0 {
		return usageErr("give at least one task ID")
	}
	for _, id := range args {
		if id == "" {
			return usageErr("a task ID is empty")
		}
	}
	var ve *tasks.ValidationError
	if err := tasks.CheckCancelReason(o.reason); errors.As(err, &ve) {
		return usageErr("--reason %s", ve.Reason)
	}
	return nil
}

// CancelFailure is `inspector task cancel --json`'s line for a task it
// could not cancel: code not_found, task_ended (with the state the task
// ended in) or error.
type CancelFailure struct {
	ID    string      `json:"id"`
	Code  string      `json:"code"`
	Error string      `json:"error"`
	State tasks.State `json:"state,omitempty"`
}

func taskCancelCmd(app *App, g *global) *cobra.Command {
	o := &cancelOptions{}
	cmd := &cobra.Command{Use: "cancel ID...", Short: "Cancel tasks, wherever they are (state canceled, for good)",
		Long: `Cancel each task: a waiting run (pending, scheduled, retrying, deferred,
restarting, waiting) is removed from its queue; a running attempt is stopped on its
worker (an exec agent's process group gets SIGTERM, then SIGKILL; an HTTP
call is aborted). The task ends in state canceled with a task_canceled
history event carrying --reason; it is not retried, restarted or
dead-lettered. A task that has already ended (succeeded, dead_lettered,
canceled) or is unknown is reported and makes the exit status 1.`,
		Args: cobra.ArbitraryArgs,
		RunE: g.withSession(app, o.Validate, func(cmd *cobra.Command, args []string, s *session) error {
			client := tasks.NewClient(s.rdb, s.cfg.ClientOptions()...)
			var w *tabwriter.Writer
			failed, seen := 0, map[string]bool{}
			for _, id := range args {
				if seen[id] { // an ID given twice is canceled once
					continue
				}
				seen[id] = true
				res, err := client.Cancel(cmd.Context(), id, o.reason)
				if err != nil {
					failed++
					f := cancelFailure(id, err)
					if o.json {
						printJSON(app, f)
					}
					tprintf(app.Err, "inspector: cancel %s: %s\n", id, f.Error)
					continue
				}
				if o.json {
					printJSON(app, res)
					continue
				}
				if w == nil { // the table's header, once something was canceled
					w = table(app)
					fmt.Fprintln(w, "ID\tSTATE\tWAS\tRUN")
				}
				run := "removed from its queue"
				if !res.Removed {
					run = "stopping on its worker"
				}
				tprintf(w, "%s\t%s\t%s\t%s\n", res.ID, res.State, res.PreviousState, run)
			}
			if w != nil {
				_ = w.Flush()
			}
			if failed > 0 {
				return runtimeErr(fmt.Errorf("%d of %d tasks not canceled", failed, len(seen)))
			}
			return nil
		})}
	cmd.Flags().StringVar(&o.reason, "reason", "", "why (kept in the task's history)")
	cmd.Flags().BoolVar(&o.json, "json", false, "JSON Lines: one result (or failure) per task")
	return cmd
}

// cancelFailure describes a failed cancel of task id.
func cancelFailure(id string, err error) CancelFailure {
	var ended *tasks.EndedError
	switch {
	case errors.Is(err, tasks.ErrNotFound):
		return CancelFailure{ID: id, Code: "not_found", Error: fmt.Sprintf("no task with ID %q (never enqueued, or its history has expired)", id)}
	case errors.As(err, &ended):
		return CancelFailure{ID: id, Code: "task_ended", Error: err.Error(), State: ended.State}
	}
	return CancelFailure{ID: id, Code: "error", Error: err.Error()}
}

func restartsCmd(app *App, g *global) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{Use: "restarts", Short: "List tasks waiting for a restart", Args: noArgs,
		RunE: g.withSession(app, nil, func(cmd *cobra.Command, _ []string, s *session) error {
			list, err := restart.NewScheduler(s.rdb, nil).List(cmd.Context(), 0)
			if err != nil {
				return runtimeErr(err)
			}
			printList(app, asJSON, list, "ID\tAGENT\tRESTART\tDUE\tCLASS\tERROR", func(w io.Writer, p restart.Pending) {
				tprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\n", p.ID, p.Agent, p.Restart, ts(p.DueAt), p.Class, short(p.Error, 60))
			})
			return nil
		})}
	cmd.Flags().BoolVar(&asJSON, "json", false, "JSON Lines")
	return cmd
}

// Stats is `inspector stats --json`: inspect.Stats (its fields at the top
// level) and the provider limits.
type Stats struct {
	inspect.Stats
	// Limits are the provider limits keys (as `inspector limits` shows
	// them); empty when none is in use.
	Limits []LimitRow `json:"limits"`
}

// QueueStats is one asynq queue's size (inspect.QueueStats).
type QueueStats = inspect.QueueStats

func statsCmd(app *App, g *global) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{Use: "stats", Short: "Queue sizes, dead letters, restarts, breakers, limits", Args: noArgs,
		RunE: g.withSession(app, nil, func(cmd *cobra.Command, _ []string, s *session) error {
			collected, _, err := inspect.Collect(cmd.Context(), s.rdb, nil)
			if err != nil {
				return runtimeErr(err)
			}
			st := Stats{Stats: collected}
			if st.Limits, err = listLimits(cmd.Context(), s.rdb, s.cfg); err != nil {
				return runtimeErr(err)
			}
			if asJSON {
				printJSON(app, st)
				return nil
			}
			w := table(app)
			fmt.Fprintln(w, "QUEUE\tPENDING\tIN LANES\tTENANTS\tACTIVE\tSCHEDULED\tRETRY\tPROCESSED TODAY\tFAILED TODAY\tPAUSED")
			for _, q := range st.Queues {
				paused := "-"
				if q.Paused {
					paused = "paused"
				}
				tprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", q.Queue, q.Pending, q.PendingInLanes, q.Tenants, q.Active, q.Scheduled, q.Retry,
					q.Processed, q.Failed, paused)
			}
			_ = w.Flush()
			tprintf(app.Out, "dead letters: %d   restarts pending: %d   breakers: %d (%d open)\n",
				st.DeadLetters, st.RestartsPending, st.Breakers, st.BreakersOpen)
			for _, l := range st.Limits {
				paused := ""
				if l.PausedUntil != nil {
					paused = "   paused until " + ts(*l.PausedUntil)
				}
				tprintf(app.Out, "limits %s: requests %s   tokens %s   in flight %s%s\n", l.Key,
					usage(l.RequestsInWindow, int64(l.Requests)), usage(l.TokensInWindow, l.Tokens), usage(l.InFlight, int64(l.Concurrency)), paused)
			}
			return nil
		})}
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object")
	return cmd
}
