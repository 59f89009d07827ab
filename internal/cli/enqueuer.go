package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/api"
	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/budget"
	"github.com/agentq/agentq/internal/tracing"
	"github.com/agentq/agentq/tasks"
)

// enqueueOptions are the flags of `enqueuer`.
type enqueueOptions struct {
	agent, action, params, id, queue, file, correlationID string
	in                                                    time.Duration
	json                                                  bool
	concurrency                                           int
	// failFast refuses tasks whose agent's breaker is open (exit 3).
	failFast bool
	// notify names configured webhooks (--notify, repeatable or a comma list).
	notify []string
	// wait waits for the task to end and prints its result (--wait),
	// for at most waitTimeout (0: no limit).
	wait        bool
	waitTimeout time.Duration
	// deadline is --deadline (a duration from now or an RFC 3339 time);
	// deadlineAt is when it is, set by Validate.
	deadline   string
	deadlineAt time.Time
	// tenant and priority are --tenant and --priority (tasks.Task's).
	tenant, priority string
	// maxTokens and maxCostUSD are --max-tokens and --max-cost-usd, the
	// task's own cap (tasks.Task's MaxTokens, MaxCostUSD).
	maxTokens  int64
	maxCostUSD float64
}

// Validate checks the flags before anything touches Redis.
func (o *enqueueOptions) Validate() error {
	if o.waitTimeout < 0 {
		return usageErr("--wait-timeout must not be negative (got %s)", o.waitTimeout)
	}
	if o.waitTimeout > 0 && !o.wait {
		return usageErr("--wait-timeout goes with --wait")
	}
	if o.file != "" {
		if o.wait {
			return usageErr("--wait goes with one task, not --file")
		}
		if o.agent != "" || o.params != "" || o.id != "" || o.deadline != "" || len(o.notify) > 0 || o.tenant != "" || o.priority != "" ||
			o.maxTokens != 0 || o.maxCostUSD != 0 {
			return usageErr("--file cannot be combined with --agent, --params, --id, --deadline, --notify, --tenant, --priority, --max-tokens or --max-cost-usd (a line has its own \"deadline\", \"notify\", \"tenant\", \"priority\", \"max_tokens\" and \"max_cost_usd\")")
		}
		return nil
	}
	if o.agent == "" {
		return usageErr("--agent is required (or --file to enqueue JSON Lines)")
	}
	if o.in < 0 {
		return usageErr("--in must not be negative (got %s)", o.in)
	}
	if o.in > tasks.MaxDelay {
		return usageErr("--in is too large: a task may be delayed by at most %s (10 years)", tasks.MaxDelay)
	}
	if err := flagCheck("--tenant", tasks.CheckTenant(o.tenant)); err != nil {
		return err
	}
	if err := flagCheck("--priority", tasks.CheckPriority(o.priority)); err != nil {
		return err
	}
	return o.validateDeadline(time.Now())
}

// flagCheck turns a field check's *tasks.ValidationError into a usage
// error naming flag.
func flagCheck(flag string, err error) error {
	var ve *tasks.ValidationError
	if errors.As(err, &ve) {
		return usageErr("%s %s", flag, ve.Reason)
	}
	return err
}

// validateDeadline reads --deadline at now into deadlineAt: a bad, past
// or impossible deadline (not after the first run is due) is a usage error.
func (o *enqueueOptions) validateDeadline(now time.Time) error {
	if o.deadline == "" {
		return nil
	}
	dl, err := tasks.ParseDeadline(o.deadline, now)
	if err == nil {
		err = tasks.CheckDeadline(dl, now, o.in)
	}
	var ve *tasks.ValidationError
	if errors.As(err, &ve) {
		return usageErr("--deadline %s", ve.Reason)
	}
	o.deadlineAt = dl
	return nil
}

// enqueuerLong is `enqueuer --help`.
const enqueuerLong = `Enqueue one task:     enqueuer --agent A [--action X] [--params JSON|@file] [--id ID] [--queue Q] [--in DUR] [--deadline DUR|TIME] [--notify HOOK] [--tenant T] [--priority high|normal|low]
Enqueue JSON Lines:   enqueuer --file tasks.jsonl   (or --file - for standard input)
Serve the HTTP API:   enqueuer serve [--http ADDR]   (see enqueuer serve --help)
Each line: {"id":"…","agent":"…","action":"…","params":{…},"correlation_id":"…","queue":"…","in":"30s","deadline":"5m","fail_if_unavailable":true,"notify":["hook"],"tenant":"T","priority":"high","max_tokens":50000,"max_cost_usd":1.5}
A task ID given twice is not enqueued twice, nor is the ID of a dead letter.
A task ID may not contain '#' (run N of task X has the ID X#N), and a task's
queue must be one of the config's worker.queues (default: "default"): both
are refused with exit status 2.
--fail-if-unavailable (or "fail_if_unavailable": true on a line) refuses to
enqueue while the agent's circuit breaker is open, or the task's tenant or
agent budget is exhausted: exit status 3, naming the agent and when its
breaker may admit a trial again, or the budget and when it resets; with
--file nothing is enqueued when any line is refused.
--wait waits for the task to end and prints its result JSON (exit 0); a task
that ends dead_lettered or canceled prints its failure (class, error,
reason) on stderr, exit 4; --wait-timeout D gives up after D, exit 5 (the
task goes on). With --json the task's whole JSON is printed on stdout.`

// NewEnqueuerCmd builds the `enqueuer` command tree.
func NewEnqueuerCmd(app *App) *cobra.Command {
	var g global
	o := &enqueueOptions{}
	root := newRoot(app, "enqueuer", "Enqueue agent tasks (prints each task ID)", &g)
	root.Long = enqueuerLong
	root.Args = noArgs
	o.addFlags(root)
	root.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := o.Validate(); err != nil {
			return err
		}
		defer startTracing(cmd.Context(), app, "agentq-enqueuer")()
		// TRACEPARENT (W3C) makes the enqueue spans children of the caller's.
		ctx := tracing.ExtractEnv(cmd.Context(), app.Getenv)
		if o.file != "" {
			return runEnqueueFile(ctx, app, &g, o)
		}
		return o.runOne(ctx, app, &g)
	}
	root.AddCommand(newServeCmd(app, &g))
	return root
}

// addFlags defines the enqueuer's flags on cmd over o.
func (o *enqueueOptions) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.agent, "agent", "", "agent to run")
	f.StringVar(&o.action, "action", "", "action name passed to the agent")
	f.StringVar(&o.params, "params", "", "params as JSON, or @file to read them from a file")
	f.StringVar(&o.id, "id", "", "task ID (idempotency key); default: random")
	f.StringVar(&o.queue, "queue", "", "queue (default: the agent's agents.NAME.queue, else \"default\")")
	f.StringVar(&o.correlationID, "correlation-id", "", "correlation ID passed to the agent")
	f.DurationVar(&o.in, "in", 0, "run no earlier than this long from now")
	f.StringVar(&o.deadline, "deadline", "", "give up at this deadline: a duration from now (\"30s\") or an RFC 3339 time; the task then ends dead_lettered (deadline_exceeded)")
	f.StringVar(&o.file, "file", "", "JSON Lines file of tasks, or - for standard input")
	f.BoolVar(&o.json, "json", false, "print a JSON result object per task instead of the ID")
	f.IntVar(&o.concurrency, "concurrency", 16, "batches of --file lines enqueued in parallel")
	f.BoolVar(&o.failFast, "fail-if-unavailable", false, "refuse (exit 3) while the agent's circuit breaker is open or the task's tenant or agent budget is exhausted")
	f.BoolVar(&o.wait, "wait", false, "wait for the task to end: print its result (exit 0), or its failure (exit 4); see --wait-timeout")
	f.DurationVar(&o.waitTimeout, "wait-timeout", 0, "with --wait: give up after this long (exit 5); 0 waits until the task ends")
	f.StringVar(&o.tenant, "tenant", "", "tenant the task is for (at most 128 bytes; default: the default tenant); dispatch is fair across tenants")
	f.StringVar(&o.priority, "priority", "", "priority within its tenant: high, normal or low (default: normal)")
	f.Int64Var(&o.maxTokens, "max-tokens", 0, "the task's own cap: tokens all its attempts, retries and restarts may use; once reached it ends dead_lettered (budget_exhausted); 0: none")
	f.Float64Var(&o.maxCostUSD, "max-cost-usd", 0, "the task's own cap in US dollars (priced models), as --max-tokens; 0: none")
	f.StringSliceVar(&o.notify, "notify", nil, "configured webhook to tell of the task's events (repeatable, or a comma list); exit 2 for one the config does not have")
}

// runOne enqueues the one task the flags describe. ctx carries the
// caller's trace (TRACEPARENT); Redis is opened and checked with it too.
func (o *enqueueOptions) runOne(ctx context.Context, app *App, g *global) error {
	params, err := readParams(o.params)
	if err != nil {
		return err
	}
	t := tasks.Task{ID: o.id, Agent: o.agent, Action: o.action, Params: params, Queue: o.queue, CorrelationID: o.correlationID,
		Deadline: o.deadlineAt, Tenant: o.tenant, Priority: o.priority, MaxTokens: o.maxTokens, MaxCostUSD: o.maxCostUSD}
	cfg, err := g.loadConfig(app)
	if err != nil {
		return err
	}
	if t.Queue == "" {
		t.Queue = cfg.AgentQueue(t.Agent)
	}
	if t.Notify, err = cfg.ResolveNotify(t.Agent, o.notify); err != nil {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("--notify: %w", err)}
	}
	if err := validateTask(t, cfg); err != nil {
		return err
	}
	rdb, err := OpenRedis(ctx, app, cfg.Redis)
	if err != nil {
		return err
	}
	defer rdb.Close()
	if o.failFast {
		if err := checkFailFast(ctx, breaker.New(rdb), budget.New(rdb), cfg, t.Agent, t.Tenant); err != nil {
			return refusal(app, o.json, err)
		}
	}
	var opts []tasks.EnqueueOption
	if o.in > 0 {
		opts = append(opts, tasks.ProcessIn(o.in))
	}
	res, err := newClient(cfg, rdb).Enqueue(ctx, t, opts...)
	if errors.Is(err, tasks.ErrInvalidEnvelope) {
		return &ExitError{Code: ExitUsage, Err: err}
	}
	if err != nil {
		return runtimeErr(err)
	}
	if o.wait {
		return o.waitFor(ctx, app, newClient(cfg, rdb), res.ID)
	}
	printResult(app, o.json, res)
	return nil
}

// refusal turns a fail-fast check's error into the command's error: an
// *api.UnavailableError is exit 3 (with --json, its agent_unavailable
// object is printed on stdout), anything else (Redis down) exit 1.
func refusal(app *App, asJSON bool, err error) error {
	body, ok := refusalBody(err)
	if !ok {
		return runtimeErr(err)
	}
	if asJSON {
		printJSON(app, body)
	}
	return &ExitError{Code: ExitUnavailable, Err: err}
}

// refusalBody is the JSON of a fail-fast refusal (an open breaker, an
// exhausted budget); ok false for any other error.
func refusalBody(err error) (api.ErrorBody, bool) {
	var ue *api.UnavailableError
	if errors.As(err, &ue) {
		return ue.ErrorBody(), true
	}
	var be *api.BudgetExhaustedError
	if errors.As(err, &be) {
		return be.ErrorBody(), true
	}
	return api.ErrorBody{}, false
}

// checkFailFast is the fail-fast check of a task of agent for tenant: its
// agent's breaker, then its tenant's and agent's budgets.
func checkFailFast(ctx context.Context, br *breaker.Breakers, keeper *budget.Keeper, cfg *config.Config, agent, tenant string) error {
	if err := api.CheckAvailable(ctx, br, cfg, agent); err != nil {
		return err
	}
	return api.CheckBudgets(ctx, keeper, cfg, agent, tenant, time.Now())
}

func printResult(app *App, asJSON bool, res tasks.Result) {
	if asJSON {
		printJSON(app, res)
		return
	}
	tprintf(app.Out, "%s\n", res.ID)
	switch {
	case res.Duplicate && res.State == tasks.StateDeadLettered:
		tprintf(app.Err, "enqueuer: task %s already exists as a dead letter; not enqueued again (inspector dlq requeue %s runs it again)\n", res.ID, res.ID)
	case res.Duplicate:
		tprintf(app.Err, "enqueuer: task %s already exists (state %s); not enqueued again\n", res.ID, res.State)
	}
}

// newClient is the client enqueuer enqueues with: records kept for the
// config's history.retention (as the worker keeps them), and only the
// queues of worker.queues accepted.
func newClient(cfg *config.Config, rdb redis.UniversalClient) *tasks.Client {
	return tasks.NewClient(rdb, cfg.ClientOptions()...)
}

// validateTask checks t as the producers do (tasks.Task.Check: a caller ID
// without '#', a queue the config's workers serve); a bad task is exit 2.
func validateTask(t tasks.Task, cfg *config.Config) error {
	if err := t.Check(cfg.ServedQueues()); err != nil {
		return &ExitError{Code: ExitUsage, Err: err}
	}
	return nil
}

// readParams accepts inline JSON or @file.
func readParams(s string) (json.RawMessage, error) {
	if s == "" {
		return nil, nil
	}
	src := "--params"
	b := []byte(s)
	if strings.HasPrefix(s, "@") {
		var err error
		src = s[1:]
		b, err = os.ReadFile(s[1:])
		if err != nil {
			return nil, usageErr("--params: %v", err)
		}
	}
	if !json.Valid(b) {
		var v any
		err := json.Unmarshal(b, &v)
		return nil, usageErr("%s is not valid JSON: %v", src, err)
	}
	return json.RawMessage(b), nil
}

// fileItem is a valid --file line (a tasks.Request) on its way to the
// queue.
type fileItem struct {
	t        tasks.Task
	in       time.Duration // the line's "in"
	line     int
	failFast bool // --fail-if-unavailable or the line's fail_if_unavailable
}

// runEnqueueFile validates every line first; when any is bad it enqueues
// nothing and names each bad line (exit 2). Then it runs the fail-fast
// checks the lines ask for (exit 3 when any is refused: nothing is
// enqueued), enqueues in parallel and prints the IDs in input order.
func runEnqueueFile(ctx context.Context, app *App, g *global, o *enqueueOptions) error {
	r, closeFile, err := openTaskFile(app, o.file)
	if err != nil {
		return err
	}
	defer closeFile()
	cfg, err := g.loadConfig(app)
	if err != nil {
		return err
	}
	items, err := readTaskLines(app, r, cfg, o)
	if err != nil {
		return err
	}
	rdb, err := OpenRedis(ctx, app, cfg.Redis)
	if err != nil {
		return err
	}
	defer rdb.Close()
	var checks []lineCheck
	for _, it := range items {
		if it.failFast {
			checks = append(checks, lineCheck{line: it.line, agent: it.t.Agent, tenant: it.t.Tenant})
		}
	}
	if err := checkLines(ctx, app, o, cfg, rdb, checks); err != nil {
		return err
	}
	results, errs := enqueueFileItems(ctx, newClient(cfg, rdb), items, o.concurrency)
	failed := 0
	for i, res := range results {
		if errs[i] != nil {
			failed++
			fmt.Fprintf(app.Err, "enqueuer: task %d (%s): %v\n", i+1, items[i].t.ID, errs[i])
			continue
		}
		printResult(app, o.json, res)
	}
	if failed > 0 {
		return runtimeErr(fmt.Errorf("%d of %d tasks could not be enqueued", failed, len(items)))
	}
	return nil
}

// openTaskFile opens the --file (standard input for "-"); an error is a
// usage error.
func openTaskFile(app *App, name string) (io.Reader, func(), error) {
	if name == "-" {
		return app.In, func() {}, nil
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, nil, usageErr("--file: %v", err)
	}
	return f, func() { _ = f.Close() }, nil
}

// readTaskLines reads and validates every line of r (blank lines and
// #-comments skipped). When any line is bad it names each on stderr and
// returns a usage error: nothing may be enqueued.
func readTaskLines(app *App, r io.Reader, cfg *config.Config, o *enqueueOptions) ([]fileItem, error) {
	var items []fileItem
	var bad []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		it, err := parseTaskLine(text, cfg)
		if err != nil {
			bad = append(bad, fmt.Sprintf("line %d: %v", line, err))
			continue
		}
		it.line, it.failFast = line, o.failFast || it.failFast
		items = append(items, it)
	}
	if err := sc.Err(); err != nil {
		return nil, usageErr("--file: line %d: %v", line+1, err)
	}
	if len(bad) > 0 {
		for _, b := range bad {
			fmt.Fprintln(app.Err, "enqueuer: "+b)
		}
		return nil, usageErr("%d bad line(s) in %s; nothing was enqueued", len(bad), o.file)
	}
	return items, nil
}

// parseTaskLine decodes one --file line (unknown fields refused) and
// validates its task as validateTask does; failFast is the line's
// fail_if_unavailable.
func parseTaskLine(text string, cfg *config.Config) (fileItem, error) {
	var r tasks.Request
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return fileItem{}, fmt.Errorf("not a task object: %v", err)
	}
	if r.Queue == "" {
		r.Queue = cfg.AgentQueue(r.Agent)
	}
	notify, err := cfg.ResolveNotify(r.Agent, r.Notify)
	if err != nil {
		return fileItem{}, &ExitError{Code: ExitUsage, Err: fmt.Errorf("field \"notify\": %w", err)}
	}
	r.Notify = notify
	t, in, err := r.Task(cfg.ServedQueues())
	if err != nil {
		return fileItem{}, &ExitError{Code: ExitUsage, Err: err}
	}
	return fileItem{t: t, in: in, failFast: r.FailIfUnavailable}, nil
}

// fileChunk is one EnqueueMany call of --file: the indexes of its items,
// which share a delay.
type fileChunk struct {
	in  time.Duration
	idx []int
}

// enqueueFileItems enqueues items in pipelined batches
// (tasks.Client.EnqueueMany) of up to fileBatch items with the same delay,
// in file order, up to concurrency batches at a time. results[i] and
// errs[i] are the outcome of items[i].
func enqueueFileItems(ctx context.Context, client *tasks.Client, items []fileItem, concurrency int) ([]tasks.Result, []error) {
	results := make([]tasks.Result, len(items))
	errs := make([]error, len(items))
	var chunks []fileChunk
	open := map[time.Duration]int{} // delay -> index in chunks of its open chunk
	for i, it := range items {
		c, ok := open[it.in]
		if !ok || len(chunks[c].idx) == fileBatch {
			chunks = append(chunks, fileChunk{in: it.in})
			c = len(chunks) - 1
			open[it.in] = c
		}
		chunks[c].idx = append(chunks[c].idx, i)
	}
	var wg sync.WaitGroup
	next := make(chan fileChunk)
	for w := 0; w < max(concurrency, 1); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range next {
				enqueueChunk(ctx, client, items, c, results, errs)
			}
		}()
	}
	for _, c := range chunks {
		next <- c
	}
	close(next)
	wg.Wait()
	return results, errs
}

// enqueueChunk enqueues the items of chunk c with one EnqueueMany call and
// fills in their results and errors (a partial batch: the error of each
// task that failed).
func enqueueChunk(ctx context.Context, client *tasks.Client, items []fileItem, c fileChunk, results []tasks.Result, errs []error) {
	ts := make([]tasks.Task, len(c.idx))
	for j, i := range c.idx {
		ts[j] = items[i].t
	}
	var opts []tasks.EnqueueOption
	if c.in > 0 {
		opts = append(opts, tasks.ProcessIn(c.in))
	}
	res, err := client.EnqueueMany(ctx, ts, opts...)
	var be *tasks.BatchError
	for j, i := range c.idx {
		switch {
		case err == nil || (errors.As(err, &be) && j < len(res)):
			results[i] = res[j]
		default:
			errs[i] = err
		}
	}
	if be != nil {
		for _, f := range be.Failed {
			errs[c.idx[f.Index]] = f.Err
		}
	}
}

// fileBatch is the most --file lines sent in one EnqueueMany call.
const fileBatch = 1000

// lineCheck is a --file line whose task asks for the fail-fast check.
type lineCheck struct {
	line          int
	agent, tenant string
}

// checkLines runs the fail-fast check of the given --file lines (one breaker
// read and one budget check per agent and tenant). When any is refused it names each refused line and
// returns exit 3: nothing is enqueued.
func checkLines(ctx context.Context, app *App, o *enqueueOptions, cfg *config.Config, rdb redis.UniversalClient, lines []lineCheck) error {
	if len(lines) == 0 {
		return nil
	}
	br, keeper := breaker.New(rdb), budget.New(rdb)
	checked := map[string]error{}
	refused := 0
	var firstRefusal error
	for _, lc := range lines {
		line, key := lc.line, lc.agent+"\x00"+lc.tenant
		err, ok := checked[key]
		if !ok {
			err = checkFailFast(ctx, br, keeper, cfg, lc.agent, lc.tenant)
			checked[key] = err
		}
		if err == nil {
			continue
		}
		body, ok := refusalBody(err)
		if !ok {
			return runtimeErr(err)
		}
		refused++
		if firstRefusal == nil {
			firstRefusal = err
		}
		fmt.Fprintf(app.Err, "enqueuer: line %d: %v\n", line, err)
		if o.json {
			printJSON(app, body)
		}
	}
	if refused > 0 {
		return &ExitError{Code: ExitUnavailable, Err: fmt.Errorf("%d task(s) refused because their agent is unavailable or their budget exhausted (first: %w); nothing was enqueued", refused, firstRefusal)}
	}
	return nil
}
