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

	"github.com/spf13/cobra"

	"github.com/agentq/agentq/tasks"
)

// enqueueOptions are the flags of `enqueuer`.
type enqueueOptions struct {
	agent, action, params, id, queue, file, correlationID string
	in                                                    time.Duration
	json                                                  bool
	concurrency                                           int
}

// Validate checks the flags before anything touches Redis.
func (o *enqueueOptions) Validate() error {
	if o.file != "" {
		if o.agent != "" || o.params != "" || o.id != "" {
			return usageErr("--file cannot be combined with --agent, --params or --id")
		}
		return nil
	}
	if o.agent == "" {
		return usageErr("--agent is required (or --file to enqueue JSON Lines)")
	}
	if o.in < 0 {
		return usageErr("--in must not be negative (got %s)", o.in)
	}
	return nil
}

// NewEnqueuerCmd builds the `enqueuer` command tree.
func NewEnqueuerCmd(app *App) *cobra.Command {
	var g global
	o := &enqueueOptions{}
	root := newRoot(app, "enqueuer", "Enqueue agent tasks (prints each task ID)", &g)
	root.Long = `Enqueue one task:     enqueuer --agent A [--action X] [--params JSON|@file] [--id ID] [--queue Q] [--in DUR]
Enqueue JSON Lines:   enqueuer --file tasks.jsonl   (or --file - for standard input)
Each line: {"id":"…","agent":"…","action":"…","params":{…},"correlation_id":"…","queue":"…"}
A task ID given twice is not enqueued twice.`
	root.Args = noArgs
	f := root.Flags()
	f.StringVar(&o.agent, "agent", "", "agent to run")
	f.StringVar(&o.action, "action", "", "action name passed to the agent")
	f.StringVar(&o.params, "params", "", "params as JSON, or @file to read them from a file")
	f.StringVar(&o.id, "id", "", "task ID (idempotency key); default: random")
	f.StringVar(&o.queue, "queue", "", "queue (default \"default\")")
	f.StringVar(&o.correlationID, "correlation-id", "", "correlation ID passed to the agent")
	f.DurationVar(&o.in, "in", 0, "run no earlier than this long from now")
	f.StringVar(&o.file, "file", "", "JSON Lines file of tasks, or - for standard input")
	f.BoolVar(&o.json, "json", false, "print a JSON result object per task instead of the ID")
	f.IntVar(&o.concurrency, "concurrency", 16, "parallel enqueues for --file")
	root.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := o.Validate(); err != nil {
			return err
		}
		if o.file != "" {
			return runEnqueueFile(cmd.Context(), app, &g, o)
		}
		params, err := readParams(o.params)
		if err != nil {
			return err
		}
		t := tasks.Task{ID: o.id, Agent: o.agent, Action: o.action, Params: params, Queue: o.queue, CorrelationID: o.correlationID}
		if err := validateTask(t); err != nil {
			return err
		}
		_, rdb, err := g.connect(cmd.Context(), app)
		if err != nil {
			return err
		}
		defer rdb.Close()
		client := tasks.NewClient(rdb)
		var opts []tasks.EnqueueOption
		if o.in > 0 {
			opts = append(opts, tasks.ProcessIn(o.in))
		}
		res, err := client.Enqueue(cmd.Context(), t, opts...)
		if err != nil {
			return runtimeErr(err)
		}
		printResult(app, o.json, res)
		return nil
	}
	root.AddCommand(newServeCmd(app, &g))
	return root
}

func printResult(app *App, asJSON bool, res tasks.Result) {
	if asJSON {
		b, _ := json.Marshal(res)
		fmt.Fprintln(app.Out, string(b))
		return
	}
	fmt.Fprintln(app.Out, res.ID)
	if res.Duplicate {
		fmt.Fprintf(app.Err, "enqueuer: task %s already exists (state %s); not enqueued again\n", res.ID, res.State)
	}
}

func validateTask(t tasks.Task) error {
	env := tasks.Envelope{ID: t.ID, Agent: t.Agent, Params: t.Params}
	if env.ID == "" {
		env.ID = "x"
	}
	if err := env.Validate(); err != nil {
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

// lineTask is one line of an --file.
type lineTask struct {
	ID            string          `json:"id"`
	Agent         string          `json:"agent"`
	Action        string          `json:"action"`
	Params        json.RawMessage `json:"params"`
	CorrelationID string          `json:"correlation_id"`
	Queue         string          `json:"queue"`
	In            string          `json:"in"`
}

// runEnqueueFile validates every line first; when any is bad it enqueues
// nothing and names each bad line (exit 2). Then it enqueues in parallel and
// prints the IDs in input order.
func runEnqueueFile(ctx context.Context, app *App, g *global, o *enqueueOptions) error {
	var r io.Reader
	if o.file == "-" {
		r = app.In
	} else {
		f, err := os.Open(o.file)
		if err != nil {
			return usageErr("--file: %v", err)
		}
		defer f.Close()
		r = f
	}
	type item struct {
		t  tasks.Task
		in time.Duration
	}
	var items []item
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
		var lt lineTask
		dec := json.NewDecoder(strings.NewReader(text))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&lt); err != nil {
			bad = append(bad, fmt.Sprintf("line %d: not a task object: %v", line, err))
			continue
		}
		t := tasks.Task{ID: lt.ID, Agent: lt.Agent, Action: lt.Action, Params: lt.Params, CorrelationID: lt.CorrelationID, Queue: lt.Queue}
		var in time.Duration
		if lt.In != "" {
			d, err := time.ParseDuration(lt.In)
			if err != nil || d < 0 {
				bad = append(bad, fmt.Sprintf("line %d: field \"in\": not a non-negative duration: %q", line, lt.In))
				continue
			}
			in = d
		}
		if err := validateTask(t); err != nil {
			bad = append(bad, fmt.Sprintf("line %d: %v", line, err))
			continue
		}
		items = append(items, item{t, in})
	}
	if err := sc.Err(); err != nil {
		return usageErr("--file: line %d: %v", line+1, err)
	}
	if len(bad) > 0 {
		for _, b := range bad {
			fmt.Fprintln(app.Err, "enqueuer: "+b)
		}
		return usageErr("%d bad line(s) in %s; nothing was enqueued", len(bad), o.file)
	}
	_, rdb, err := g.connect(ctx, app)
	if err != nil {
		return err
	}
	defer rdb.Close()
	client := tasks.NewClient(rdb)
	results := make([]tasks.Result, len(items))
	errs := make([]error, len(items))
	n := o.concurrency
	if n < 1 {
		n = 1
	}
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				var opts []tasks.EnqueueOption
				if items[i].in > 0 {
					opts = append(opts, tasks.ProcessIn(items[i].in))
				}
				results[i], errs[i] = client.Enqueue(ctx, items[i].t, opts...)
			}
		}()
	}
	for i := range items {
		next <- i
	}
	close(next)
	wg.Wait()
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
		return runtimeErr(errors.New(fmt.Sprintf("%d of %d tasks could not be enqueued", failed, len(items))))
	}
	return nil
}

func newServeCmd(app *App, g *global) *cobra.Command {
	var addr string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the HTTP API (POST /api/v1/tasks, …)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageErr("enqueuer serve is not available in this version (see CHANGELOG)")
		},
	}
	cmd.Flags().StringVar(&addr, "http", "127.0.0.1:8080", "listen address")
	return cmd
}
