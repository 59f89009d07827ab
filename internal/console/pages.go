package console

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/inspect"
	"github.com/agentq/agentq/internal/restart"
	"github.com/agentq/agentq/resilience"
	"github.com/agentq/agentq/tasks"
)

// pageNames are the templates under templates/, each parsed with layout.html.
var pageNames = []string{"overview.html", "deadletters.html", "deadletter.html", "bulk.html", "task.html",
	"tasks.html", "breakers.html", "agents.html", "restarts.html", "webhooks.html", "workers.html", "tenants.html", "schedules.html", "usage.html", "budgets.html", "login.html", "error.html"}

func parsePages() map[string]*template.Template {
	funcs := template.FuncMap{
		"ts": func(t any) string {
			switch v := t.(type) {
			case time.Time:
				if v.IsZero() {
					return "–"
				}
				return v.UTC().Format("2006-01-02 15:04:05Z")
			case *time.Time:
				if v == nil || v.IsZero() {
					return "–"
				}
				return v.UTC().Format("2006-01-02 15:04:05Z")
			case string:
				if pt, err := time.Parse(time.RFC3339Nano, v); err == nil {
					return pt.UTC().Format("2006-01-02 15:04:05Z")
				}
				if v == "" {
					return "–"
				}
				return v
			}
			return fmt.Sprint(t)
		},
		"ms": func(ms int64) string {
			if ms <= 0 {
				return ""
			}
			return (time.Duration(ms) * time.Millisecond).String()
		},
		"age": func(ms int64) string {
			return (time.Duration(max(0, ms)) * time.Millisecond).Round(time.Second).String()
		},
		"short": func(s string, n int) string {
			s = strings.Join(strings.Fields(s), " ")
			if r := []rune(s); len(r) > n {
				return string(r[:n-1]) + "…"
			}
			return s
		},
		"hours":  hours,
		"pretty": prettyJSON,
		"path":   url.PathEscape,
		"dict": func(kv ...any) map[string]any {
			m := map[string]any{}
			for i := 0; i+1 < len(kv); i += 2 {
				k, _ := kv[i].(string)
				m[k] = kv[i+1]
			}
			return m
		},
		"pct":  func(f float64) string { return strconv.FormatFloat(f*100, 'f', 0, 64) + "%" },
		"usd":  func(f float64) string { return "$" + strconv.FormatFloat(f, 'f', 6, 64) },
		"wait": parseWait,
	}
	out := map[string]*template.Template{}
	for _, name := range pageNames {
		t := template.Must(template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/parts.html", "templates/"+name))
		out[name] = t
	}
	return out
}

// prettyJSON indents raw JSON (as is when it is not JSON).
func prettyJSON(raw []byte) string { return rewriteJSON(raw, "  ") }

// rewriteJSON writes raw JSON again, each level indented by indent (""
// compact), its numbers as they are and <, >, & unescaped (it is shown as
// text, never as HTML); as is when it is not JSON.
func rewriteJSON(raw []byte, indent string) string {
	if len(raw) == 0 {
		return ""
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return string(raw)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", indent)
	if err := enc.Encode(v); err != nil {
		return string(raw)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// count is a name and a number, for the sorted breakdowns.
type count struct {
	Name string
	N    int64
}

func sortedCounts(m map[string]int64) []count {
	out := make([]count, 0, len(m))
	for k, v := range m {
		out = append(out, count{k, v})
	}
	slices.SortFunc(out, func(a, b count) int { return cmp.Or(cmp.Compare(b.N, a.N), cmp.Compare(a.Name, b.Name)) })
	return out
}

// overview serves GET /ui/.
func (c *Console) overview(rw http.ResponseWriter, r *http.Request, s session) error {
	ctx, cancel := c.bounded(r, 2)
	defer cancel()
	st, bl, err := inspect.Collect(ctx, c.Redis, c.Breakers)
	if err != nil {
		return err
	}
	agents, err := inspect.Summaries(ctx, c.Redis, c.Breakers, inspect.AgentRefs(c.Config))
	if err != nil {
		return err
	}
	// Every breaker Redis knows and every configured agent's (a breaker
	// never used is closed and not in Redis yet).
	bl, _, err = c.breakerRows(ctx, bl)
	if err != nil {
		return err
	}
	byState := map[string]int64{}
	open := 0
	for _, b := range bl {
		byState[string(b.State)]++
		if b.State == breaker.StateOpen {
			open++
		}
	}
	var total inspect.QueueStats
	for _, q := range st.Queues {
		total.Pending += q.Pending
		total.Active += q.Active
		total.Scheduled += q.Scheduled
		total.Retry += q.Retry
		total.Processed += q.Processed
		total.Failed += q.Failed
	}
	data := map[string]any{
		"Stats": st, "Total": total, "Breakers": len(bl), "BreakersOpen": open,
		"ByAgent": sortedCounts(st.DeadLetterAgent), "ByClass": sortedCounts(st.DeadLetterClass),
		"BreakerStates": []count{{"closed", byState["closed"]}, {"half_open", byState["half_open"]}, {"open", byState["open"]}},
		"Agents":        agents,
	}
	if sm := c.opts.Sampler; sm != nil {
		samples, err := sm.Samples(ctx)
		if err != nil {
			return err
		}
		ch := buildCharts(samples, sm.opts.Now(), sm.Window())
		ch.Keep, ch.Every = sm.Keep(), sm.Every()
		data["Charts"] = ch
	}
	c.render(rw, r, s, http.StatusOK, "overview.html", "overview", "Overview", data)
	return nil
}

// dlFilter reads ?agent=&class= (the class must be a known one).
func dlFilter(q url.Values) (deadletter.Filter, error) {
	f := deadletter.Filter{Agent: strings.TrimSpace(q.Get("agent")), Class: strings.TrimSpace(q.Get("class"))}
	if f.Class != "" {
		if _, err := resilience.ParseClass(f.Class); err != nil {
			return f, httpError(http.StatusBadRequest, "Unknown error class %q.", f.Class)
		}
	}
	return f, nil
}

func filterQuery(f deadletter.Filter) url.Values {
	q := url.Values{}
	if f.Agent != "" {
		q.Set("agent", f.Agent)
	}
	if f.Class != "" {
		q.Set("class", f.Class)
	}
	return q
}

// pager is the paging of a list read by offset (the dead letters, the
// budgets): the template "pager" draws it.
type pager struct {
	Offset, Limit int
	Total         int64
	From, To      int64
	Page, Pages   int64
	First, Prev   string // links ("" when on the first page)
	Next, Last    string // links ("" when on the last page)
}

// lastPageOffset is the offset of the last page of total rows of size
// per page (0 when there are none): where an offset past the end (a list
// that shrank under a shared link) lands.
func lastPageOffset(total int64, size int) int {
	if total <= 0 {
		return 0
	}
	return int((total - 1) / int64(size) * int64(size))
}

// newPager pages total rows, size per page, at offset, of which the page
// shows shown; link is the page at an offset.
func newPager(total int64, offset, size, shown int, link func(offset int) string) pager {
	p := pager{Offset: offset, Limit: size, Total: total}
	if total > 0 {
		p.Pages = (total + int64(size) - 1) / int64(size)
		p.Page = int64(offset)/int64(size) + 1
		p.From = int64(offset) + 1
		p.To = int64(offset) + int64(shown)
	}
	if offset > 0 {
		p.First = link(0)
		p.Prev = link(max(0, offset-size))
	}
	if int64(offset+size) < total {
		p.Next = link(offset + size)
		p.Last = link(lastPageOffset(total, size))
	}
	return p
}

// offsetParam is the list offset a page's query asks for (?offset=; none,
// negative or not a number: 0).
func offsetParam(q url.Values) int {
	offset, _ := strconv.Atoi(q.Get("offset"))
	return max(0, offset)
}

func (c *Console) pageLink(f deadletter.Filter, offset int) string {
	q := filterQuery(f)
	if offset > 0 {
		q.Set("offset", strconv.Itoa(offset))
	}
	if len(q) == 0 {
		return c.base + "deadletters"
	}
	return c.base + "deadletters?" + q.Encode()
}

// deadLetters serves GET /ui/deadletters?agent=&class=&offset=.
func (c *Console) deadLetters(rw http.ResponseWriter, r *http.Request, s session) error {
	q := r.URL.Query()
	f, err := dlFilter(q)
	if err != nil {
		return err
	}
	offset := offsetParam(q)
	f.Limit, f.Offset = c.opts.PageSize, offset
	ctx, cancel := c.bounded(r, 1)
	defer cancel()
	entries, total, err := c.DeadLetters.List(ctx, f)
	if err != nil {
		return err
	}
	if offset > 0 && int64(offset) >= total {
		// Past the end (the list shrank under a shared link, or the last
		// row of the last page was requeued or deleted): the last page.
		offset = lastPageOffset(total, c.opts.PageSize)
		f.Offset = offset
		if entries, total, err = c.DeadLetters.List(ctx, f); err != nil {
			return err
		}
	}
	byAgent, _, err := c.DeadLetters.CountBy(ctx)
	if err != nil {
		return err
	}
	agentSet := map[string]bool{}
	for a := range byAgent {
		agentSet[a] = true
	}
	for _, a := range c.Config.AgentNames() {
		agentSet[a] = true
	}
	if f.Agent != "" {
		agentSet[f.Agent] = true
	}
	agentNames := make([]string, 0, len(agentSet))
	for a := range agentSet {
		agentNames = append(agentNames, a)
	}
	slices.Sort(agentNames)
	classes := make([]string, 0, len(resilience.Classes()))
	for _, cl := range resilience.Classes() {
		classes = append(classes, string(cl))
	}
	p := newPager(total, offset, c.opts.PageSize, len(entries), func(o int) string { return c.pageLink(f, o) })
	fq := filterQuery(f)
	data := map[string]any{
		"Entries": entries, "Filter": f, "Agents": agentNames, "Classes": classes, "Pager": p,
		"FilterQuery": fq.Encode(), "Back": stripFlash(r.URL.RequestURI()),
	}
	c.render(rw, r, s, http.StatusOK, "deadletters.html", "deadletters", "Dead letters", data)
	return nil
}

// deadLetter serves GET /ui/deadletter/{id}.
func (c *Console) deadLetter(rw http.ResponseWriter, r *http.Request, s session) error {
	ctx, cancel := c.bounded(r, 1)
	defer cancel()
	id := r.PathValue("id")
	e, err := c.DeadLetters.Get(ctx, id)
	if errors.Is(err, deadletter.ErrNotFound) {
		return httpError(http.StatusNotFound, "No dead letter %q (requeued, deleted, or never dead-lettered).", id)
	}
	if err != nil {
		return err
	}
	c.render(rw, r, s, http.StatusOK, "deadletter.html", "deadletters", "Dead letter "+id, map[string]any{"E": e})
	return nil
}

// back is where a POST returns: the form's "back" when it is a console
// page, else def.
func (c *Console) back(r *http.Request, def string) string {
	b := r.PostForm.Get("back")
	if b == "" || c.safeNext(b) != b {
		return def
	}
	return b
}

// requeue serves POST /ui/deadletter/{id}/requeue.
func (c *Console) requeue(rw http.ResponseWriter, r *http.Request, s session) error {
	ctx, cancel := c.bounded(r, 1)
	defer cancel()
	id := r.PathValue("id")
	// The run the page showed: a click on a page older than the dead
	// letter (the task was requeued and died again since) requeues nothing.
	run := deadletter.AnyRun
	if v := r.PostForm.Get("run"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return httpError(http.StatusBadRequest, "Bad run %q.", v)
		}
		run = n
	}
	_, err := c.DeadLetters.RequeueTaskRun(ctx, c.Client, id, run)
	var conflict *deadletter.ConflictError
	switch {
	case errors.Is(err, deadletter.ErrNotFound):
		return httpError(http.StatusNotFound, "No dead letter %q (already requeued or deleted?).", id)
	case errors.As(err, &conflict):
		return httpError(http.StatusConflict, "Not requeued: %v. Reload the page to see it as it is now.", conflict)
	case err != nil:
		return err
	}
	c.redirect(rw, r, s, stripFlash(c.back(r, c.base+"deadletters")), flashMsg{Kind: "requeued", ID: id})
	return nil
}

// deleteDeadLetter serves POST /ui/deadletter/{id}/delete.
func (c *Console) deleteDeadLetter(rw http.ResponseWriter, r *http.Request, s session) error {
	ctx, cancel := c.bounded(r, 1)
	defer cancel()
	id := r.PathValue("id")
	n, err := c.DeadLetters.Delete(ctx, id)
	if err != nil {
		return err
	}
	if n == 0 {
		return httpError(http.StatusNotFound, "No dead letter %q (already requeued or deleted?).", id)
	}
	c.redirect(rw, r, s, stripFlash(c.back(r, c.base+"deadletters")), flashMsg{Kind: "deleted", ID: id})
	return nil
}

// stripFlash drops a previous flash's parameters from a return path (done,
// and those older versions put in the URL).
func stripFlash(p string) string {
	u, err := url.Parse(p)
	if err != nil {
		return p
	}
	q := u.Query()
	for _, k := range []string{"done", "id", "n", "failed", "key", "for", "more"} {
		q.Del(k)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// bulkConfirm serves GET /ui/deadletters/bulk?action=requeue|delete&agent=&class=:
// the confirmation, stating how many dead letters the action would touch.
func (c *Console) bulkConfirm(rw http.ResponseWriter, r *http.Request, s session) error {
	q := r.URL.Query()
	action := q.Get("action")
	if action != "requeue" && action != "delete" {
		return httpError(http.StatusBadRequest, "action must be requeue or delete.")
	}
	f, err := dlFilter(q)
	if err != nil {
		return err
	}
	ctx, cancel := c.bounded(r, 1)
	defer cancel()
	f.Limit = 1
	newest, total, err := c.DeadLetters.List(ctx, f)
	if err != nil {
		return err
	}
	through := ""
	if len(newest) > 0 {
		through = strconv.FormatInt(newest[0].DeadLetteredAt.UnixMilli(), 10)
	}
	data := map[string]any{"Action": action, "Filter": f, "Total": total, "Through": through,
		"Cancel": c.pageLink(deadletter.Filter{Agent: f.Agent, Class: f.Class}, 0)}
	c.render(rw, r, s, http.StatusOK, "bulk.html", "deadletters", "Confirm", data)
	return nil
}

// bulkTimeout bounds a bulk requeue or delete.
const bulkTimeout = 25 * time.Second

// bulk serves POST /ui/deadletters/bulk: requeue or delete every dead
// letter of the filter (the form's agent and class) — with "through" (the
// confirmation's newest, Unix ms), only those dead-lettered by then: the
// set the confirmation counted, not those that came since.
func (c *Console) bulk(rw http.ResponseWriter, r *http.Request, s session) error {
	f, err := dlFilter(r.PostForm)
	if err != nil {
		return err
	}
	if v := strings.TrimSpace(r.PostForm.Get("through")); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms < 0 {
			return httpError(http.StatusBadRequest, "through: %q is not a time in Unix milliseconds.", v)
		}
		f.Through = time.UnixMilli(ms)
	}
	// Within the server's write timeout (30 s): what is left when time runs
	// out stays in the store, and the flash says to run it again.
	ctx, cancel := context.WithTimeout(r.Context(), bulkTimeout)
	defer cancel()
	back := c.pageLink(f, 0)
	switch r.PostForm.Get("action") {
	case "requeue":
		n, failed, err := c.DeadLetters.RequeueMatching(ctx, c.Client, f, nil)
		if err != nil && n == 0 {
			return err
		}
		c.redirect(rw, r, s, back, flashMsg{Kind: "requeued-n", N: n, Failed: failed, More: err != nil})
	case "delete":
		n, err := c.DeadLetters.DeleteMatching(ctx, f)
		if err != nil && n == 0 {
			return err
		}
		c.redirect(rw, r, s, back, flashMsg{Kind: "deleted-n", N: n, More: err != nil})
	default:
		return httpError(http.StatusBadRequest, "action must be requeue or delete.")
	}
	return nil
}

// exportDeadLetters serves GET /ui/deadletters/export?agent=&class=: JSON
// Lines. A script must never take a short export for a whole one:
//   - the status is sent with the first line, so a failure before it (Redis
//     down at the first read) is the error page with its status (503 when
//     Redis is unavailable), not a 200 with an empty body;
//   - a failure after it (Redis lost mid-stream, the 20-timeout bound
//     reached) cannot change the status any more: the lines written so far
//     are flushed and the connection is aborted (http.ErrAbortHandler), so
//     the chunked reply has no end and the client sees an error (curl exit
//     18, Go's unexpected EOF), not a clean end of file.
func (c *Console) exportDeadLetters(rw http.ResponseWriter, r *http.Request, _ session) error {
	f, err := dlFilter(r.URL.Query())
	if err != nil {
		return err
	}
	ctx, cancel := c.bounded(r, 20)
	defer cancel()
	w := &exportWriter{rw: rw}
	n, err := c.DeadLetters.Export(ctx, w, f)
	if err == nil {
		w.start() // no dead letters: a 200 with an empty body
		return nil
	}
	if !w.started {
		return err
	}
	c.opts.Logger.Warn("console: export failed part-way; aborting the connection", "lines", n, "err", err)
	_ = http.NewResponseController(rw).Flush()
	panic(http.ErrAbortHandler)
}

// exportWriter sends the export's headers and status with its first write.
type exportWriter struct {
	rw      http.ResponseWriter
	started bool
}

func (w *exportWriter) start() {
	if w.started {
		return
	}
	w.started = true
	h := w.rw.Header()
	h.Set("Content-Type", "application/x-ndjson")
	h.Set("Content-Disposition", `attachment; filename="deadletters.jsonl"`)
	w.rw.WriteHeader(http.StatusOK)
}

func (w *exportWriter) Write(p []byte) (int, error) {
	w.start()
	return w.rw.Write(p)
}

// cancellable are the states a task can be canceled in.
var cancellable = map[tasks.State]bool{
	tasks.StatePending: true, tasks.StateScheduled: true, tasks.StateRetrying: true,
	tasks.StateDeferred: true, tasks.StateRestarting: true, tasks.StateActive: true, tasks.StateWaiting: true,
}

// task serves GET /ui/tasks/{id}.
func (c *Console) task(rw http.ResponseWriter, r *http.Request, s session) error {
	ctx, cancel := c.bounded(r, 1)
	defer cancel()
	id := r.PathValue("id")
	v, err := c.Tasks.Get(ctx, id)
	fromDLQ := false
	if errors.Is(err, tasks.ErrNotFound) {
		e, derr := c.DeadLetters.Get(ctx, id)
		if derr != nil {
			if errors.Is(derr, deadletter.ErrNotFound) {
				return httpError(http.StatusNotFound, "No task %q (never enqueued, or its record expired).", id)
			}
			return derr
		}
		v, err, fromDLQ = e.TaskView(), nil, true
	}
	if err != nil {
		return err
	}
	inDLQ := fromDLQ
	if !inDLQ && v.State == tasks.StateDeadLettered {
		if _, derr := c.DeadLetters.Get(ctx, id); derr == nil {
			inDLQ = true
		}
	}
	live := !fromDLQ && !v.State.Terminal()
	var output *taskOutput
	if !live && !fromDLQ { // a live task's page replays its output live
		output = c.readOutput(ctx, id)
	}
	tctx, tcancel := c.bounded(r, 2) // a tree is read a level a round trip
	defer tcancel()
	data := map[string]any{"T": v, "CanCancel": c.opts.Canceler != nil && cancellable[v.State], "InDLQ": inDLQ, "FromDLQ": fromDLQ,
		"Live": live, "Wait": parseWait(v.Wait), "WaitSignal": waitingSignal(v.State, v.Wait), "Resumed": resumed(v),
		"Tree": c.runTree(tctx, v), "Output": output}
	c.render(rw, r, s, http.StatusOK, "task.html", "", "Task "+id, data)
	return nil
}

// cancel serves POST /ui/tasks/{id}/cancel.
func (c *Console) cancel(rw http.ResponseWriter, r *http.Request, s session) error {
	if c.opts.Canceler == nil {
		return httpError(http.StatusNotFound, "Canceling tasks is not available on this server.")
	}
	ctx, cancel := c.bounded(r, 1)
	defer cancel()
	id := r.PathValue("id")
	reason := strings.TrimSpace(r.PostForm.Get("reason"))
	if reason == "" {
		reason = "canceled from the console"
	}
	if err := c.opts.Canceler.Cancel(ctx, id, reason); err != nil {
		var verr *tasks.ValidationError
		switch {
		case errors.Is(err, tasks.ErrNotFound):
			return httpError(http.StatusNotFound, "No task %q.", id)
		case errors.As(err, &verr):
			return httpError(http.StatusBadRequest, "Task %s could not be canceled: %v", id, err)
		}
		return httpError(http.StatusConflict, "Task %s could not be canceled: %v", id, err)
	}
	c.redirect(rw, r, s, c.base+"tasks/"+url.PathEscape(id), flashMsg{Kind: "canceled", ID: id})
	return nil
}

// breakerRows lists every breaker Redis knows and every configured agent's.
// list is what breakers.List read (nil: read it now).
func (c *Console) breakerRows(ctx context.Context, list []breaker.Snapshot) ([]breaker.Snapshot, map[string][]string, error) {
	if list == nil {
		var err error
		if list, err = c.Breakers.List(ctx); err != nil {
			return nil, nil, err
		}
	}
	seen := map[string]bool{}
	for _, b := range list {
		seen[b.Key] = true
	}
	users := map[string][]string{}
	for _, ref := range inspect.AgentRefs(c.Config) {
		users[ref.BreakerKey] = append(users[ref.BreakerKey], ref.Name)
		if seen[ref.BreakerKey] {
			continue
		}
		seen[ref.BreakerKey] = true
		snap, err := c.Breakers.Get(ctx, ref.BreakerKey)
		if err != nil {
			return nil, nil, err
		}
		list = append(list, snap)
	}
	slices.SortFunc(list, func(a, b breaker.Snapshot) int { return cmp.Compare(a.Key, b.Key) })
	return list, users, nil
}

// breakerList serves GET /ui/breakers.
func (c *Console) breakerList(rw http.ResponseWriter, r *http.Request, s session) error {
	ctx, cancel := c.bounded(r, 1)
	defer cancel()
	list, users, err := c.breakerRows(ctx, nil)
	if err != nil {
		return err
	}
	c.render(rw, r, s, http.StatusOK, "breakers.html", "breakers", "Breakers", map[string]any{"Breakers": list, "Users": users, "Modes": breakerModes(c.Config)})
	return nil
}

func breakerKey(r *http.Request) (string, error) {
	key := r.PostForm.Get("key")
	if key == "" {
		return "", httpError(http.StatusBadRequest, "The form names no breaker (field key).")
	}
	return key, nil
}

// checkBreakerKey refuses (400) a key that no agent of the config uses and
// that Redis has no breaker for: a trip or reset would leave a phantom
// breaker for ever. The console has no override (inspector's --force has).
func (c *Console) checkBreakerKey(ctx context.Context, key string) error {
	err := c.Breakers.CheckKey(ctx, key, inspect.BreakerKeys(c.Config))
	var uk *resilience.UnknownKeyError
	if errors.As(err, &uk) {
		return httpError(http.StatusBadRequest, "Unknown breaker: %s.", uk.Error())
	}
	return err
}

// breakerReset serves POST /ui/breakers/reset (key).
func (c *Console) breakerReset(rw http.ResponseWriter, r *http.Request, s session) error {
	key, err := breakerKey(r)
	if err != nil {
		return err
	}
	ctx, cancel := c.bounded(r, 1)
	defer cancel()
	if err := c.checkBreakerKey(ctx, key); err != nil {
		return err
	}
	if err := c.Breakers.Reset(ctx, key); err != nil {
		return err
	}
	c.redirect(rw, r, s, c.base+"breakers", flashMsg{Kind: "reset", Key: key})
	return nil
}

// breakerTrip serves POST /ui/breakers/trip (key, for: a Go duration).
func (c *Console) breakerTrip(rw http.ResponseWriter, r *http.Request, s session) error {
	key, err := breakerKey(r)
	if err != nil {
		return err
	}
	d, err := time.ParseDuration(strings.TrimSpace(r.PostForm.Get("for")))
	if err != nil || d <= 0 {
		return httpError(http.StatusBadRequest, "Trip for: %q is not a positive duration (e.g. 30s, 10m, 1h).", r.PostForm.Get("for"))
	}
	ctx, cancel := c.bounded(r, 1)
	defer cancel()
	if err := c.checkBreakerKey(ctx, key); err != nil {
		return err
	}
	if err := c.Breakers.Trip(ctx, key, d); err != nil {
		return err
	}
	c.redirect(rw, r, s, c.base+"breakers", flashMsg{Kind: "tripped", Key: key, For: d.String()})
	return nil
}

// agents serves GET /ui/agents.
func (c *Console) agents(rw http.ResponseWriter, r *http.Request, s session) error {
	ctx, cancel := c.bounded(r, 1)
	defer cancel()
	list, err := inspect.Summaries(ctx, c.Redis, c.Breakers, inspect.AgentRefs(c.Config))
	if err != nil {
		return err
	}
	byAgent, _, err := c.DeadLetters.CountBy(ctx)
	if err != nil {
		return err
	}
	type row struct {
		inspect.AgentSummary
		Kind, Queue string
		DeadLetters int64
	}
	rows := make([]row, 0, len(list))
	for _, a := range list {
		ar := row{AgentSummary: a, DeadLetters: byAgent[a.Agent], Queue: c.Config.AgentQueue(a.Agent)}
		if ag, ok := c.Config.Agent(a.Agent); ok {
			switch {
			case ag.Exec != nil:
				ar.Kind = "exec"
			case ag.HTTP != nil:
				ar.Kind = "http"
			default:
				ar.Kind = "go"
			}
		}
		rows = append(rows, ar)
	}
	c.render(rw, r, s, http.StatusOK, "agents.html", "agents", "Agents", map[string]any{"Agents": rows})
	return nil
}

// restarts serves GET /ui/restarts.
func (c *Console) restarts(rw http.ResponseWriter, r *http.Request, s session) error {
	ctx, cancel := c.bounded(r, 1)
	defer cancel()
	sch := restart.NewScheduler(c.Redis, nil)
	list, err := sch.List(ctx, 500)
	if err != nil {
		return err
	}
	n, err := sch.Count(ctx)
	if err != nil {
		return err
	}
	c.render(rw, r, s, http.StatusOK, "restarts.html", "restarts", "Restarts", map[string]any{"Restarts": list, "Total": n})
	return nil
}
