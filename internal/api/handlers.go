package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/internal/inspect"
	"github.com/agentq/agentq/internal/tracing"
	"github.com/agentq/agentq/tasks"
)

// TaskRequest is one task of POST /api/v1/tasks (tasks.Request, which is
// also a line of `enqueuer --file`).
type TaskRequest = tasks.Request

// BatchRequest is a batch of POST /api/v1/tasks.
type BatchRequest struct {
	Tasks []TaskRequest `json:"tasks"`
	// FailIfUnavailable applies fail-fast to every task of the batch.
	FailIfUnavailable bool `json:"fail_if_unavailable,omitempty"`
}

// EnqueueResponse answers a single task: 202 with Created when it was
// enqueued, 200 with Duplicate and the existing Task when its ID was
// already enqueued.
type EnqueueResponse struct {
	ID        string      `json:"id"`
	Created   bool        `json:"created"`
	Duplicate bool        `json:"duplicate"`
	State     tasks.State `json:"state"`
	Task      *tasks.View `json:"task,omitempty"`
}

// ItemResult is one task's result in a BatchResponse: Code and Error are
// set when that task could not be enqueued (Redis failed mid-batch).
type ItemResult struct {
	Index     int         `json:"index"`
	ID        string      `json:"id"`
	Created   bool        `json:"created"`
	Duplicate bool        `json:"duplicate"`
	State     tasks.State `json:"state,omitempty"`
	Code      string      `json:"code,omitempty"`
	Error     string      `json:"error,omitempty"`
}

// BatchResponse answers a batch: 202 when any task was created, 200 when
// every one already existed. When none could be enqueued at all, the status
// is that of the first failure (503, 500) and Code and Error are set.
type BatchResponse struct {
	Results    []ItemResult `json:"results"`
	Created    int          `json:"created"`
	Duplicates int          `json:"duplicates"`
	Failed     int          `json:"failed"`
	Code       string       `json:"code,omitempty"`
	Error      string       `json:"error,omitempty"`
}

// item is a validated task.
type item struct {
	task     tasks.Task
	delay    time.Duration
	failFast bool
}

// readBody reads the (size-limited) body.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	if r.Body == nil {
		return nil, invalid("request body is empty; expected JSON")
	}
	b, err := io.ReadAll(r.Body)
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, newErr(http.StatusRequestEntityTooLarge, CodeRequestTooLarge, "request body is larger than %d bytes", mbe.Limit)
	}
	if err != nil {
		return nil, invalid("reading the request body: %v", err)
	}
	return b, nil
}

// jsonError describes a decoding error with its position in data.
func jsonError(what string, data []byte, err error) *apiError {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		line, col := position(data, se.Offset)
		return invalid("malformed JSON in %s at line %d, column %d (byte offset %d): %v", what, line, col, se.Offset, err)
	case errors.As(err, &te):
		line, col := position(data, te.Offset)
		field := te.Field
		if field == "" {
			return invalid("%s must be a JSON object, got JSON %s (line %d, column %d)", what, te.Value, line, col)
		}
		return invalid("%s: field %q: expected %s, got JSON %s (line %d, column %d)", what, field, te.Type, te.Value, line, col)
	case errors.Is(err, io.EOF):
		return invalid("%s is empty; expected a JSON object", what)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return invalid("malformed JSON in %s: unexpected end of input at byte offset %d", what, len(data))
	}
	return invalid("%s: %v", what, err)
}

// position turns a byte offset into a 1-based line and column.
func position(data []byte, off int64) (line, col int) {
	off = max(0, min(off, int64(len(data))))
	before := data[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(off) - (bytes.LastIndexByte(before, '\n') + 1)
	return line, max(col, 1)
}

// strictDecode decodes one JSON object into v, refusing unknown fields.
func strictDecode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("unexpected data after the JSON value at byte offset %d", dec.InputOffset())
	}
	return nil
}

// validate checks one task and resolves its fields; prefix names it in
// messages ("" or "tasks[3]: ").
func (s *Server) validate(tr TaskRequest, prefix string) (item, error) {
	if tr.Agent == "" {
		return item{}, invalid("%sfield \"agent\" is required", prefix)
	}
	if len(s.Config.Agents) > 0 {
		if _, ok := s.Config.Agents[tr.Agent]; !ok {
			return item{}, invalid("%sunknown agent %q (configured agents: %v)", prefix, tr.Agent, s.Config.AgentNames())
		}
	}
	if tr.Queue == "" {
		tr.Queue = s.Config.AgentQueue(tr.Agent)
	}
	notify, err := s.Config.ResolveNotify(tr.Agent, tr.Notify)
	if err != nil {
		return item{}, invalid("%sfield \"notify\": %v", prefix, err)
	}
	tr.Notify = notify
	t, delay, err := tr.Task(s.Config.ServedQueues())
	var ve *tasks.ValidationError
	if errors.As(err, &ve) {
		return item{}, invalid("%sfield %q %s", prefix, ve.Field, ve.Reason)
	} else if err != nil {
		return item{}, invalid("%s%v", prefix, err)
	}
	return item{task: t, delay: delay, failFast: tr.FailIfUnavailable}, nil
}

// parseEnqueue decodes and validates a single task or a batch; batch tells
// which it was.
func (s *Server) parseEnqueue(data []byte) (items []item, batch bool, err error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, false, invalid("request body is empty; expected a task object or {\"tasks\": [...]}")
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, false, jsonError("the request body", data, err)
	}
	if _, ok := top["tasks"]; !ok {
		var tr TaskRequest
		if err := strictDecode(data, &tr); err != nil {
			return nil, false, jsonError("the task", data, err)
		}
		it, err := s.validate(tr, "")
		if err != nil {
			return nil, false, err
		}
		return []item{it}, false, nil
	}
	var br struct {
		Tasks             []json.RawMessage `json:"tasks"`
		FailIfUnavailable bool              `json:"fail_if_unavailable"`
	}
	if err := strictDecode(data, &br); err != nil {
		return nil, true, jsonError("the batch", data, err)
	}
	switch {
	case len(br.Tasks) == 0:
		return nil, true, invalid("field \"tasks\" is empty; a batch needs at least one task")
	case len(br.Tasks) > s.opts.MaxBatch:
		return nil, true, invalid("field \"tasks\" has %d tasks; a batch may have at most %d", len(br.Tasks), s.opts.MaxBatch)
	}
	items = make([]item, len(br.Tasks))
	for i, raw := range br.Tasks {
		prefix := fmt.Sprintf("tasks[%d]: ", i)
		var tr TaskRequest
		if err := strictDecode(raw, &tr); err != nil {
			e := jsonError(fmt.Sprintf("tasks[%d]", i), raw, err)
			e.body.Index = &i
			return nil, true, e
		}
		it, err := s.validate(tr, prefix)
		if err != nil {
			var ae *apiError
			if errors.As(err, &ae) {
				ae.body.Index = &i
			}
			return nil, true, err
		}
		it.failFast = it.failFast || br.FailIfUnavailable
		items[i] = it
	}
	return items, true, nil
}

// enqueue serves POST /api/v1/tasks.
func (s *Server) enqueue(rw http.ResponseWriter, r *http.Request) error {
	if r.Header.Get("traceparent") != "" {
		// W3C trace context: the caller's span is the parent of each task's
		// enqueue span (or, untraced, what the task carries to the agent).
		r = r.WithContext(tracing.Extract(r.Context(), r.Header))
	}
	data, err := readBody(r, s.opts.MaxBody)
	if err != nil {
		return err
	}
	items, batch, err := s.parseEnqueue(data)
	if err != nil {
		return err
	}
	n := 1
	if batch {
		n = 4
	}
	ctx, cancel := s.bounded(r, n)
	defer cancel()

	if err := s.failFast(ctx, items, batch); err != nil {
		return err
	}

	if !batch {
		it := items[0]
		res, err := s.Client.Enqueue(ctx, it.task, enqueueOpts(it)...)
		if err != nil {
			return err
		}
		if !res.Duplicate {
			rw.Header().Set("Location", "/api/v1/tasks/"+url.PathEscape(res.ID))
			writeJSON(rw, http.StatusAccepted, EnqueueResponse{ID: res.ID, Created: true, State: res.State})
			return nil
		}
		out := EnqueueResponse{ID: res.ID, Duplicate: true, State: res.State}
		if v, err := s.Tasks.Get(ctx, res.ID); err == nil {
			out.Task = v
			out.State = v.State
		} else if res.State == tasks.StateDeadLettered {
			// The record expired; the dead letter is what is left of the task.
			if e, err := s.DeadLetters.Get(ctx, res.ID); err == nil {
				out.Task = e.TaskView()
			}
		}
		writeJSON(rw, http.StatusOK, out)
		return nil
	}
	return s.enqueueBatch(rw, r, ctx, items)
}

func enqueueOpts(it item) []tasks.EnqueueOption {
	if it.delay > 0 {
		return []tasks.EnqueueOption{tasks.ProcessIn(it.delay)}
	}
	return nil
}

// enqueueBatch enqueues validated items, 8 at a time. A caller ID repeated
// within the batch is enqueued once; its later copies are duplicates.
func (s *Server) enqueueBatch(rw http.ResponseWriter, r *http.Request, ctx context.Context, items []item) error {
	results := make([]ItemResult, len(items))
	errs := make([]error, len(items))
	first := map[string]int{}
	var work []int
	for i, it := range items {
		results[i].Index = i
		if id := it.task.ID; id != "" {
			if j, ok := first[id]; ok {
				results[i].ID = id
				results[i].Duplicate = true
				errs[i] = errSameAs{j}
				continue
			}
			first[id] = i
		}
		work = append(work, i)
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < min(8, len(work)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				res, err := s.Client.Enqueue(ctx, items[i].task, enqueueOpts(items[i])...)
				if err != nil {
					errs[i] = err
					continue
				}
				results[i] = ItemResult{Index: i, ID: res.ID, Created: !res.Duplicate, Duplicate: res.Duplicate, State: res.State}
			}
		}()
	}
	for _, i := range work {
		next <- i
	}
	close(next)
	wg.Wait()

	out := BatchResponse{Results: results}
	var firstErr *apiError
	for i := range results {
		var same errSameAs
		switch {
		case errors.As(errs[i], &same):
			src := results[same.index]
			results[i].State = src.State
			if src.Code != "" {
				results[i].Code, results[i].Error = src.Code, src.Error
			}
		case errs[i] != nil:
			ae := s.classify(r.Context(), errs[i])
			results[i].Code, results[i].Error = ae.body.Code, ae.body.Error
			if firstErr == nil {
				firstErr = ae
			}
		}
		switch {
		case results[i].Code != "":
			out.Failed++
		case results[i].Created:
			out.Created++
		default:
			out.Duplicates++
		}
	}
	status := http.StatusOK
	switch {
	case out.Created > 0:
		status = http.StatusAccepted
	case firstErr != nil:
		status = firstErr.status
		out.Code = firstErr.body.Code
		out.Error = fmt.Sprintf("no task of the batch could be enqueued: %s", firstErr.body.Error)
	}
	writeJSON(rw, status, out)
	return nil
}

// errSameAs marks a batch item whose ID repeats item index's.
type errSameAs struct{ index int }

func (e errSameAs) Error() string { return fmt.Sprintf("same ID as tasks[%d]", e.index) }

// getTask serves GET /api/v1/tasks/{id}.
func (s *Server) getTask(rw http.ResponseWriter, r *http.Request) error {
	if r.URL.Query().Has("wait") {
		return s.getTaskWait(rw, r)
	}
	return s.writeTask(rw, r, r.PathValue("id"))
}

// writeTask answers task id's record (404 when it has none): the read of
// GET /api/v1/tasks/{id}, with or without ?wait.
func (s *Server) writeTask(rw http.ResponseWriter, r *http.Request, id string) error {
	ctx, cancel := s.bounded(r, 1)
	defer cancel()
	v, err := s.Tasks.Get(ctx, id)
	if errors.Is(err, tasks.ErrNotFound) {
		return taskNotFound(id)
	}
	if err != nil {
		return err
	}
	writeJSON(rw, http.StatusOK, v)
	return nil
}

// taskNotFound is the 404 of a task with no record.
func taskNotFound(id string) error {
	return newErr(http.StatusNotFound, CodeNotFound, "no task %q (never enqueued, or its record expired)", id)
}

// agents serves GET /api/v1/agents: every configured agent with its
// breaker (and its limits, for an agent with limits).
func (s *Server) agents(rw http.ResponseWriter, r *http.Request) error {
	ctx, cancel := s.bounded(r, 1)
	defer cancel()
	out, err := inspect.Summaries(ctx, s.Redis, s.Breakers, inspect.AgentRefs(s.Config))
	if err != nil {
		return err
	}
	writeJSON(rw, http.StatusOK, map[string]any{"agents": out})
	return nil
}

// workers serves GET /api/v1/workers: the worker registry
// (inspect.Workers), live workers first.
func (s *Server) workers(rw http.ResponseWriter, r *http.Request) error {
	ctx, cancel := s.bounded(r, 1)
	defer cancel()
	out, err := inspect.Workers(ctx, s.Redis, s.opts.Now())
	if err != nil {
		return err
	}
	writeJSON(rw, http.StatusOK, map[string]any{"workers": out})
	return nil
}

// tenants serves GET /api/v1/tenants[?queue=Q]: each tenant of each queue
// (of Q only, when given) as `inspector tenants --json` shows it
// (inspect.Tenants), sorted by queue then tenant.
func (s *Server) tenants(rw http.ResponseWriter, r *http.Request) error {
	ctx, cancel := s.bounded(r, 2)
	defer cancel()
	out, err := inspect.Tenants(ctx, s.Redis, s.Config, r.URL.Query().Get("queue"))
	if err != nil {
		return err
	}
	writeJSON(rw, http.StatusOK, map[string]any{"tenants": out})
	return nil
}

// schedules serves GET /api/v1/schedules: every configured schedule with
// its next and last fire and its last task's ID and state.
func (s *Server) schedules(rw http.ResponseWriter, r *http.Request) error {
	ctx, cancel := s.bounded(r, 1)
	defer cancel()
	out, err := inspect.Schedules(ctx, s.Redis, s.Config, s.opts.Now())
	if err != nil {
		return err
	}
	writeJSON(rw, http.StatusOK, map[string]any{"schedules": out})
	return nil
}

// DeadLetterPage is the reply of GET /api/v1/deadletters.
type DeadLetterPage struct {
	DeadLetters []*deadletter.Entry `json:"deadletters"`
	// Total is how many dead letters the filters select in all.
	Total  int64 `json:"total"`
	Limit  int   `json:"limit"`
	Offset int   `json:"offset"`
}

// deadLetters serves GET /api/v1/deadletters?limit=&offset=&agent=&class=.
func (s *Server) deadLetters(rw http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit, err := intParam(q, "limit", DefaultDeadLetterLimit, 1, MaxDeadLetterLimit)
	if err != nil {
		return err
	}
	offset, err := intParam(q, "offset", 0, 0, 1<<31-1)
	if err != nil {
		return err
	}
	ctx, cancel := s.bounded(r, 1)
	defer cancel()
	entries, total, err := s.DeadLetters.List(ctx, deadletter.Filter{Agent: q.Get("agent"), Class: q.Get("class"), Offset: offset, Limit: limit})
	if err != nil {
		return err
	}
	if entries == nil {
		entries = []*deadletter.Entry{}
	}
	writeJSON(rw, http.StatusOK, DeadLetterPage{DeadLetters: entries, Total: total, Limit: limit, Offset: offset})
	return nil
}

func intParam(q url.Values, name string, def, lo, hi int) (int, error) {
	s := q.Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, invalid("query parameter %q must be an integer from %d to %d (got %q)", name, lo, hi, s)
	}
	return n, nil
}

// RequeueResponse is the reply of POST /api/v1/deadletters/{id}/requeue:
// the task is pending again, and DeadLetter is the entry that was removed.
type RequeueResponse struct {
	ID         string            `json:"id"`
	State      tasks.State       `json:"state"`
	DeadLetter *deadletter.Entry `json:"deadletter"`
}

// RequeueRequest is the optional body of POST
// /api/v1/deadletters/{id}/requeue: Run, when set, is the run of the dead
// letter the caller saw; a dead letter at another run (requeued and
// dead-lettered again since) is 409 conflict, and nothing is requeued.
// Fresh deletes the steps the task's agents recorded first (kept
// otherwise: the new run skips their work).
type RequeueRequest struct {
	Run   *int `json:"run,omitempty"`
	Fresh bool `json:"fresh,omitempty"`
}

// requeue serves POST /api/v1/deadletters/{id}/requeue: 200 with the
// RequeueResponse; 404 not_found when there is no such dead letter (or a
// concurrent requeue removed it); 409 conflict when another requeue of it
// is under way, or it is not the run the body names.
func (s *Server) requeue(rw http.ResponseWriter, r *http.Request) error {
	ctx, cancel := s.bounded(r, 1)
	defer cancel()
	id := r.PathValue("id")
	var req RequeueRequest
	if err := s.decodeOptional(r, "requeue request", &req); err != nil {
		return err
	}
	run := deadletter.AnyRun
	if req.Run != nil {
		if *req.Run < 0 {
			return invalid("requeue request: field \"run\" is %d; a run is at least 0", *req.Run)
		}
		run = *req.Run
	}
	var opts []deadletter.RequeueOption
	if req.Fresh {
		opts = append(opts, deadletter.Fresh())
	}
	e, err := s.DeadLetters.RequeueTaskRun(ctx, s.Client, id, run, opts...)
	var conflict *deadletter.ConflictError
	switch {
	case errors.Is(err, deadletter.ErrNotFound):
		return newErr(http.StatusNotFound, CodeNotFound, "no dead letter %q (requeued, deleted, or never dead-lettered)", id)
	case errors.As(err, &conflict) && e == nil:
		return newErr(http.StatusConflict, CodeConflict, "%v; nothing was requeued", conflict)
	case err != nil:
		return err
	}
	writeJSON(rw, http.StatusOK, RequeueResponse{ID: id, State: tasks.StatePending, DeadLetter: e})
	return nil
}

// CancelRequest is the optional body of POST /api/v1/tasks/{id}/cancel.
type CancelRequest struct {
	Reason string `json:"reason"`
}

// CancelResponse is the reply of POST /api/v1/tasks/{id}/cancel: the task
// is canceled (tasks.CancelResult).
type CancelResponse = tasks.CancelResult

// cancelTask serves POST /api/v1/tasks/{id}/cancel: 200 with the
// CancelResponse; 404 not_found for an unknown task; 409 task_ended (with
// state) for a task that has already ended; 400 for a bad body.
func (s *Server) cancelTask(rw http.ResponseWriter, r *http.Request) error {
	ctx, cancel := s.bounded(r, 2)
	defer cancel()
	id := r.PathValue("id")
	var req CancelRequest
	if err := s.decodeOptional(r, "cancel request", &req); err != nil {
		return err
	}
	var ve *tasks.ValidationError
	if err := tasks.CheckCancelReason(req.Reason); errors.As(err, &ve) {
		return invalid("cancel request: field %q %s", ve.Field, ve.Reason)
	}
	res, err := s.Client.Cancel(ctx, id, req.Reason)
	var ended *tasks.EndedError
	switch {
	case errors.Is(err, tasks.ErrNotFound):
		return taskNotFound(id)
	case errors.As(err, &ended):
		return taskEnded(ended)
	case err != nil:
		return err
	}
	writeJSON(rw, http.StatusOK, res)
	return nil
}

// taskEnded is the 409 task_ended of a cancel or signal of a task that
// has ended (its state in the body).
func taskEnded(ended *tasks.EndedError) *apiError {
	e := newErr(http.StatusConflict, CodeTaskEnded, "%v", ended)
	e.body.State = string(ended.State)
	return e
}

// SignalResponse is the reply of POST /api/v1/tasks/{id}/signals/{name}
// (tasks.SignalResult).
type SignalResponse = tasks.SignalResult

// signalTask serves POST /api/v1/tasks/{id}/signals/{name}: the body (any
// JSON; none: null) is the signal's data. 200 with the SignalResponse; 404
// not_found for an unknown task; 409 task_ended (with state) for a task
// that has ended, signal_cap for one with the most signals; 400
// invalid_signal for a bad name or a body that is not JSON; 413
// request_too_large for data over tasks.MaxSignalBytes.
func (s *Server) signalTask(rw http.ResponseWriter, r *http.Request) error {
	ctx, cancel := s.bounded(r, 3)
	defer cancel()
	id, name := r.PathValue("id"), r.PathValue("name")
	var data []byte
	if r.Body != nil && r.Body != http.NoBody {
		var err error
		if data, err = readBody(r, s.opts.MaxBody); err != nil {
			return err
		}
	}
	res, err := s.Client.Signal(ctx, id, name, bytes.TrimSpace(data))
	var ended *tasks.EndedError
	switch {
	case errors.Is(err, tasks.ErrNotFound):
		return taskNotFound(id)
	case errors.As(err, &ended):
		return taskEnded(ended)
	case errors.Is(err, tasks.ErrSignalInvalid):
		return newErr(http.StatusBadRequest, CodeInvalidSignal, "%v", err)
	case errors.Is(err, tasks.ErrSignalTooLarge):
		return newErr(http.StatusRequestEntityTooLarge, CodeRequestTooLarge, "%v", err)
	case errors.Is(err, tasks.ErrSignalCap):
		return newErr(http.StatusConflict, CodeSignalCap, "%v", err)
	case err != nil:
		return err
	}
	writeJSON(rw, http.StatusOK, res)
	return nil
}

// decodeOptional decodes the optional JSON body of r (what names it in an
// error) into v: no body, or only white space, leaves v as it is.
func (s *Server) decodeOptional(r *http.Request, what string, v any) error {
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	data, err := readBody(r, s.opts.MaxBody)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	if err := strictDecode(data, v); err != nil {
		return jsonError(what, data, err)
	}
	return nil
}

// listTasks serves GET /api/v1/tasks?queue=&state=&agent=&tenant=
// &correlation_id=&limit=&cursor=: a page of waiting and running tasks
// (inspect.Tasks).
func (s *Server) listTasks(rw http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit, err := intParam(q, "limit", inspect.DefaultTaskLimit, 1, inspect.MaxTaskLimit)
	if err != nil {
		return err
	}
	f := inspect.TaskFilter{Queue: q.Get("queue"), States: inspect.ParseStates(q.Get("state")), Agent: q.Get("agent"),
		Tenant: q.Get("tenant"), CorrelationID: q.Get("correlation_id"), Limit: limit, Cursor: q.Get("cursor")}
	if err := f.Validate(); err != nil {
		return invalid("%v", err)
	}
	ctx, cancel := s.bounded(r, 2)
	defer cancel()
	page, err := inspect.Tasks(ctx, s.Redis, f)
	if errors.Is(err, inspect.ErrBadCursor) {
		return invalid("parameter \"cursor\" is not a cursor this API returned")
	}
	if err != nil {
		return err
	}
	writeJSON(rw, http.StatusOK, page)
	return nil
}

// pauseQueue serves POST /api/v1/queues/{name}/pause.
func (s *Server) pauseQueue(rw http.ResponseWriter, r *http.Request) error {
	return s.setPaused(rw, r, inspect.PauseQueue)
}

// resumeQueue serves POST /api/v1/queues/{name}/resume.
func (s *Server) resumeQueue(rw http.ResponseWriter, r *http.Request) error {
	return s.setPaused(rw, r, inspect.ResumeQueue)
}

func (s *Server) setPaused(rw http.ResponseWriter, r *http.Request,
	do func(context.Context, redis.UniversalClient, string, []string) (inspect.PauseResult, error)) error {
	ctx, cancel := s.bounded(r, 3)
	defer cancel()
	res, err := do(ctx, s.Redis, r.PathValue("name"), s.Config.ServedQueues())
	if errors.Is(err, inspect.ErrUnknownQueue) {
		return newErr(http.StatusNotFound, CodeNotFound, "%v", err)
	}
	if err != nil {
		return err
	}
	writeJSON(rw, http.StatusOK, res)
	return nil
}

// failFast runs the fail-fast check of items: every refused task refuses
// the request, before anything is enqueued. One breaker read and one
// budget check per agent and tenant.
func (s *Server) failFast(ctx context.Context, items []item, batch bool) error {
	checked := map[string]error{}
	now := s.opts.Now()
	for i, it := range items {
		if !it.failFast {
			continue
		}
		key := it.task.Agent + "\x00" + it.task.Tenant
		err, ok := checked[key]
		if !ok {
			err = CheckAvailableAt(ctx, s.Breakers, s.Config, it.task.Agent, now)
			if err == nil {
				err = CheckBudgets(ctx, s.Budgets, s.Config, it.task.Agent, it.task.Tenant, now)
			}
			checked[key] = err
		}
		if err == nil {
			continue
		}
		var ue *UnavailableError
		var be *BudgetExhaustedError
		if errors.As(err, &ue) || errors.As(err, &be) {
			var ae *apiError
			if ue != nil {
				ae = unavailableErr(ue, now)
			} else {
				ae = budgetErr(be, now)
			}
			if batch {
				idx := i
				ae.body.Index = &idx
				ae.body.Error = fmt.Sprintf("tasks[%d]: %s; nothing was enqueued", i, ae.body.Error)
			}
			return ae
		}
		return err
	}
	return nil
}
