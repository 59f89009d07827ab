// Command testagent is a real exec agent for tests and the demo. It reads an
// ActionRequest from stdin and behaves as its params say:
//
//	{"mode": "echo"}                 success, data = params
//	{"mode": "fail_then_succeed", "times": N, "state_dir": D, "stderr": S, "reply": R}
//	                                 exits 1 with stderr S (default: a TCP
//	                                 connection reset) on the first N calls for
//	                                 the request's task_id (counted in a file in
//	                                 D), then succeeds; with R (an
//	                                 ActionResponse object) the first N calls
//	                                 print R and exit 0 instead
//	{"mode": "error", "code": C, "error": E}
//	                                 prints {"status":"error","code":C,"error":E}
//	{"mode": "exit", "code": C, "stderr": S, "stdout": O}
//	                                 writes O to stdout and S to stderr, exits C
//	                                 (default 1)
//	{"mode": "garbage"}              prints text that is not JSON
//	{"mode": "huge", "mb": M}        writes M MiB (default 100) to stdout
//	{"mode": "hang", "children": K, "pid_file": F, "ignore_term": B}
//	                                 starts K children of itself that ignore
//	                                 SIGTERM and hold stdout open, writes their
//	                                 PIDs to F one a line, then sleeps forever
//	                                 (ignoring SIGTERM itself when B is true,
//	                                 and with "term_file": T appending each
//	                                 SIGTERM's time, Unix ns, to T);
//	                                 with "times": N and "state_dir": D, only
//	                                 the first N calls of a task hang (counted
//	                                 as fail_then_succeed counts), later ones
//	                                 succeed at once
//	{"mode": "orphan", "children": K, "pid_file": F}
//	                                 starts K children like hang's (stdout not
//	                                 shared), writes their PIDs to F, succeeds
//	{"mode": "sleep", "ms": T}       sleeps T ms (forever when negative), then
//	                                 succeeds; "ignore_term": true ignores SIGTERM
//	{"mode": "env"}                  success, data = {"env": {NAME: value…},
//	                                 "cwd": working directory}
//	{"mode": "request"}              success, data = the ActionRequest as read
//	{"mode": "events", "lines": [L…], "before": B, "wait_file": W, "after": A, "big": N}
//	                                 writes to the descriptor named by
//	                                 AGENTQ_EVENTS_FD (exits 2 without it):
//	                                 the lines L as they are, one a line; B
//	                                 progress events {"step": i}; then, when
//	                                 W is given, waits until the file W
//	                                 exists; then A more progress events;
//	                                 then, when N > 0, one output event whose
//	                                 data is a string of N bytes; succeeds
//	                                 with {"events": B+A}
//	{"mode": "steps", "n": N, "url": U, "fail_after": K}
//	                                 an agent of N model-call steps s1…sN:
//	                                 each step the request's steps do not
//	                                 hold POSTs {"step":"sI"} to U (an
//	                                 OpenAI-compatible chat endpoint) and
//	                                 records the reply's content as the
//	                                 step's data and its usage as the
//	                                 step's usage ({"type":"step",…} on
//	                                 AGENTQ_EVENTS_FD); on attempt 1, after
//	                                 recording step K, exits 1 with a
//	                                 connection reset on stderr (retryable);
//	                                 succeeds with {"steps": [data…],
//	                                 "called": steps called this attempt}
//	{"mode": "suspend", "wait": W}    on a run that follows no suspend
//	                                 (resume 0), suspends with the wait W
//	                                 ({"status":"suspend","wait":W}); on a
//	                                 resumed run succeeds with {"resume":
//	                                 R, "wait": the request's wait,
//	                                 "signals": its signals}
//	{"mode": "fanout", "n": N, "child": C, "children": [C…], "wait_mode": M, "timeout": T}
//	                                 on a run that follows no suspend
//	                                 (resume 0), suspends with a children
//	                                 wait {"children":[…],"mode":M,
//	                                 "timeout":T} (M and T only when
//	                                 given): the list "children" as it is
//	                                 when given, else N (default 1) copies
//	                                 of the child spec C (default
//	                                 {"agent":"testagent"}) named c1…cN,
//	                                 whose params (when an object, or
//	                                 absent) get "i": their 1-based
//	                                 position; on a resumed run succeeds
//	                                 with {"resume": R, "wait": the
//	                                 request's wait, "children": how many
//	                                 children the request holds,
//	                                 "succeeded": how many of them ended
//	                                 succeeded, "ids": their IDs and
//	                                 "states": their states in spawn
//	                                 order, "results": their results}
//	{"mode": "bad_utf8", "exit": B}  writes raw invalid UTF-8 (0xFF 0xFE)
//	                                 inside JSON strings: an output event
//	                                 {"text": "a\xff\xfeb"} to the descriptor
//	                                 named by AGENTQ_EVENTS_FD (when set),
//	                                 then succeeds with data {"text":
//	                                 "a\xff\xfeb"}; with B true, writes
//	                                 "bad \xff\xfe" to stderr and exits 1
//
// In every mode, params "effects": F appends one line
// "<task_id> <attempt> <restart> <pid> <mode>" to the file F (O_APPEND, one
// write, so concurrent agents never interleave lines) before doing anything
// else: a side-effect log from which tests count duplicate executions and
// find the PIDs of the agents that ran.
//
// In every mode, params "delay_ms": T sleeps T ms after that log line and
// before the mode runs (a call that takes a while: a window to kill its
// worker in).
//
// In every mode, params "lock_dir": D first takes an exclusive flock on
// D/<task_id>.lock, which its children inherit: the lock is held until
// every process of the run is gone. When another run of the task holds
// it, the agent appends "<task_id> <attempt> <restart> <pid> overlap" to
// the effects log (when given) and exits 3: two runs of one task were
// alive at the same time.
//
// The first argument, when given, is the mode and overrides params; further
// arguments of the form key=value set params (value parsed as JSON when it
// is JSON, else taken as a string): `testagent garbage`,
// `testagent sleep ms=-1 ignore_term=true`. An empty stdin is an empty
// request.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type request struct {
	TaskID  string                     `json:"task_id"`
	Attempt int                        `json:"attempt"`
	Restart int                        `json:"restart"`
	Params  map[string]json.RawMessage `json:"params"`
	Steps   map[string]json.RawMessage `json:"steps"`
	Resume  int                        `json:"resume"`
	Wait    json.RawMessage            `json:"wait"`
	Signals map[string]json.RawMessage `json:"signals"`
	// Children is a resumed children wait's children, in spawn order.
	Children []childEnd `json:"children"`
}

// childEnd is one entry of the request's children.
type childEnd struct {
	ID         string          `json:"id"`
	Name       string          `json:"name"`
	State      string          `json:"state"`
	Result     json.RawMessage `json:"result"`
	ErrorClass string          `json:"error_class"`
	Error      string          `json:"error"`
}

const defaultStderr = "read tcp 127.0.0.1:5000->127.0.0.1:443: read: connection reset by peer"

func main() {
	in, err := io.ReadAll(os.Stdin)
	if err != nil {
		die(2, "testagent: read stdin: %v", err)
	}
	var req request
	if len(strings.TrimSpace(string(in))) > 0 {
		if err := json.Unmarshal(in, &req); err != nil {
			die(2, "testagent: bad request: %v", err)
		}
	}
	if req.Params == nil {
		req.Params = map[string]json.RawMessage{}
	}
	argParams(req.Params, os.Args[1:])
	p := params(req.Params)
	if d := p.str("lock_dir", ""); d != "" {
		lockRun(d, req, p.str("effects", ""))
	}
	if f := p.str("effects", ""); f != "" {
		logEffect(f, req, p.str("mode", "echo"))
	}
	if ms := p.int("delay_ms", 0); ms > 0 {
		time.Sleep(time.Duration(ms) * time.Millisecond)
	}

	switch mode := p.str("mode", "echo"); mode {
	case "echo":
		succeed(req.Params)
	case "request":
		succeed(json.RawMessage(in))
	case "fail_then_succeed":
		failThenSucceed(req, p)
	case "error":
		reply(map[string]any{"status": "error", "code": p.int("code", 500), "error": p.str("error", "agent error")})
	case "exit":
		fmt.Fprint(os.Stdout, p.str("stdout", ""))
		fmt.Fprint(os.Stderr, p.str("stderr", ""))
		exit(p.int("code", 1))
	case "garbage":
		fmt.Fprint(os.Stdout, "this is not JSON \x00\x1b[31m at all\n")
	case "huge":
		huge(p.int("mb", 100))
	case "hang":
		hang(req, p)
	case "orphan":
		pids := spawn(p.int("children", 2), false)
		writePIDs(p.str("pid_file", ""), pids)
		succeed(map[string]any{"children": len(pids)})
	case "sleep":
		if p.bool("ignore_term") {
			signal.Ignore(syscall.SIGTERM)
		}
		ms := p.int("ms", 0)
		if ms < 0 {
			forever()
		}
		time.Sleep(time.Duration(ms) * time.Millisecond)
		succeed(json.RawMessage(`{"slept_ms":` + strconv.Itoa(ms) + `}`))
	case "events":
		events(p)
	case "env":
		printEnv()
	case "bad_utf8":
		badUTF8(p)
	case "steps":
		steps(req, p)
	case "suspend":
		suspend(req)
	case "fanout":
		fanout(req, p)
	default:
		die(2, "testagent: unknown mode %q", mode)
	}
	exit(0)
}

// exit ends the process at once. Unlike os.Exit and returning from main it
// skips the race detector's finalization, which sleeps a second at exit in
// binaries built with -race (testbin builds this agent with -race when the
// tests run with -race). Race reports are still printed as they happen.
func exit(code int) { syscall.Exit(code) }

// failThenSucceed fails the first "times" calls of a task (with the
// ActionResponse "reply" when given), counting calls in a file named after
// the task ID in state_dir.
func failThenSucceed(req request, p params) {
	n := countCall(req, p.str("state_dir", os.TempDir()))
	if n <= p.int("times", 1) {
		if r, ok := p["reply"]; ok {
			reply(r)
			exit(0)
		}
		die(1, "%s", p.str("stderr", defaultStderr))
	}
	succeed(map[string]any{"calls": n})
}

// countCall counts this call of the request's task in a file named after
// the task ID in dir and returns the count.
func countCall(req request, dir string) int {
	file := filepath.Join(dir, "testagent-calls-"+fileName(req.TaskID))
	n := 0
	if b, err := os.ReadFile(file); err == nil {
		n, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	n++
	if err := os.WriteFile(file, []byte(strconv.Itoa(n)), 0o644); err != nil {
		die(2, "testagent: write state: %v", err)
	}
	return n
}

// fileName is s made safe as one path element.
func fileName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == 0 {
			return '_'
		}
		return r
	}, s)
}

func huge(mb int) {
	chunk := []byte(strings.Repeat("x", 64<<10))
	for i := 0; i < mb*16; i++ {
		if _, err := os.Stdout.Write(chunk); err != nil {
			exit(3)
		}
	}
}

// hang starts children that ignore SIGTERM and share stdout, records their
// PIDs, and blocks; with state_dir, only the first "times" calls of a task.
func hang(req request, p params) {
	if dir := p.str("state_dir", ""); dir != "" {
		if n := countCall(req, dir); n > p.int("times", 1) {
			succeed(map[string]any{"calls": n})
			return
		}
	}
	if p.bool("ignore_term") {
		signal.Ignore(syscall.SIGTERM)
		if f := p.str("term_file", ""); f != "" {
			noteTerms(f)
		}
	}
	writePIDs(p.str("pid_file", ""), spawn(p.int("children", 2), true))
	forever()
}

// noteTerms appends, for each SIGTERM the agent gets (and ignores), the
// time it came (Unix ns) as a line to file.
func noteTerms(file string) {
	terms := make(chan os.Signal, 1)
	signal.Notify(terms, syscall.SIGTERM)
	go func() {
		for range terms {
			f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				continue
			}
			fmt.Fprintln(f, time.Now().UnixNano())
			_ = f.Close()
		}
	}()
}

// forever blocks for good. (An empty select would end the program: the
// runtime reports a deadlock when no goroutine can ever run again.)
func forever() {
	for {
		time.Sleep(time.Hour)
	}
}

// runLock is the flock of lock_dir, inherited by the agent's children.
var runLock *os.File

// lockRun takes the run's lock on dir/<task_id>.lock, or reports an
// overlap and exits 3 when another run of the task holds it.
func lockRun(dir string, req request, effects string) {
	f, err := os.OpenFile(filepath.Join(dir, fileName(req.TaskID)+".lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		die(2, "testagent: lock: %v", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if effects != "" {
			logEffect(effects, req, "overlap")
		}
		die(3, "testagent: another run of task %s is alive: %v", req.TaskID, err)
	}
	runLock = f
}

// spawn starts n children of this program that sleep forever ignoring
// SIGTERM, in this process's group; with shareStdout they hold its stdout
// and stderr open, else theirs go to /dev/null.
func spawn(n int, shareStdout bool) []string {
	self, err := os.Executable()
	if err != nil {
		die(2, "testagent: %v", err)
	}
	var pids []string
	for i := 0; i < n; i++ {
		c := exec.Command(self, "sleep", "ms=-1", "ignore_term=true")
		if shareStdout {
			c.Stdout = os.Stdout
			c.Stderr = os.Stderr
		}
		if runLock != nil {
			c.ExtraFiles = []*os.File{runLock} // the child holds the run's lock too
		}
		if err := c.Start(); err != nil {
			die(2, "testagent: start child: %v", err)
		}
		pids = append(pids, strconv.Itoa(c.Process.Pid))
	}
	return pids
}

// logEffect appends "<task_id> <attempt> <restart> <pid> <mode>\n" to file
// in one O_APPEND write (atomic for lines this short).
func logEffect(file string, req request, mode string) {
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		die(2, "testagent: effects log: %v", err)
	}
	line := fmt.Sprintf("%s %d %d %d %s\n", req.TaskID, req.Attempt, req.Restart, os.Getpid(), mode)
	if _, err := f.Write([]byte(line)); err != nil {
		die(2, "testagent: effects log: %v", err)
	}
	_ = f.Close()
}

// writePIDs writes pids to file, one a line, atomically (readers never see
// a partial file). An empty file name writes nothing.
func writePIDs(file string, pids []string) {
	if file == "" {
		return
	}
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, []byte(strings.Join(pids, "\n")+"\n"), 0o644); err != nil {
		die(2, "testagent: %v", err)
	}
	if err := os.Rename(tmp, file); err != nil {
		die(2, "testagent: %v", err)
	}
}

func succeed(data any) {
	reply(map[string]any{"status": "success", "code": 0, "data": data, "error": ""})
}

func reply(v any) {
	if err := json.NewEncoder(os.Stdout).Encode(v); err != nil {
		die(2, "testagent: write reply: %v", err)
	}
}

func die(code int, format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	exit(code)
}

// params reads typed values out of the request's params.
type params map[string]json.RawMessage

func (p params) str(k, def string) string {
	var s string
	if raw, ok := p[k]; ok && json.Unmarshal(raw, &s) == nil {
		return s
	}
	return def
}

func (p params) int(k string, def int) int {
	var n float64
	if raw, ok := p[k]; ok && json.Unmarshal(raw, &n) == nil {
		return int(n)
	}
	return def
}

func (p params) bool(k string) bool {
	var b bool
	if raw, ok := p[k]; ok && json.Unmarshal(raw, &b) == nil {
		return b
	}
	return false
}

// events writes the events of mode "events" (see the package comment).
func events(p params) {
	fd, err := strconv.Atoi(os.Getenv("AGENTQ_EVENTS_FD"))
	if err != nil {
		die(2, "testagent: no AGENTQ_EVENTS_FD")
	}
	f := os.NewFile(uintptr(fd), "events")
	write := func(line string) {
		if _, err := f.WriteString(line + "\n"); err != nil {
			die(2, "testagent: write events: %v", err)
		}
	}
	var lines []string
	if raw, ok := p["lines"]; ok {
		if err := json.Unmarshal(raw, &lines); err != nil {
			die(2, "testagent: lines: %v", err)
		}
	}
	for _, l := range lines {
		write(l)
	}
	step := 0
	progress := func(n int) {
		for range n {
			step++
			write(`{"type":"progress","data":{"step":` + strconv.Itoa(step) + `}}`)
		}
	}
	progress(p.int("before", 0))
	if w := p.str("wait_file", ""); w != "" {
		for {
			if _, err := os.Stat(w); err == nil {
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	progress(p.int("after", 0))
	if n := p.int("big", 0); n > 0 {
		write(`{"type":"output","data":"` + strings.Repeat("x", n) + `"}`)
	}
	succeed(map[string]any{"events": step})
}

// printEnv succeeds with the agent's environment and working directory.
func printEnv() {
	env := map[string]string{}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	wd, _ := os.Getwd()
	succeed(map[string]any{"env": env, "cwd": wd})
}

// badUTF8 writes the invalid UTF-8 of mode "bad_utf8" (see the package
// comment), as raw bytes: encoding/json would replace them.
func badUTF8(p params) {
	const text = "a\xff\xfeb"
	if fd, err := strconv.Atoi(os.Getenv("AGENTQ_EVENTS_FD")); err == nil {
		f := os.NewFile(uintptr(fd), "events")
		if _, err := f.WriteString(`{"type":"output","data":{"text":"` + text + `"}}` + "\n"); err != nil {
			die(2, "testagent: write events: %v", err)
		}
	}
	if p.bool("exit") {
		fmt.Fprint(os.Stderr, "bad \xff\xfe\n")
		exit(1)
	}
	fmt.Fprint(os.Stdout, `{"status":"success","code":0,"data":{"text":"`+text+`"},"error":""}`+"\n")
}

// argParams sets the mode and params the arguments give (see the
// package's comment) in params.
func argParams(params map[string]json.RawMessage, args []string) {
	if len(args) == 0 {
		return
	}
	params["mode"], _ = json.Marshal(args[0])
	for _, kv := range args[1:] {
		k, v, _ := strings.Cut(kv, "=")
		if json.Valid([]byte(v)) {
			params[k] = json.RawMessage(v)
		} else {
			params[k], _ = json.Marshal(v)
		}
	}
}

// suspend is the "suspend" mode (see the package's comment).
func suspend(req request) {
	if req.Resume == 0 {
		reply(map[string]any{"status": "suspend", "wait": req.Params["wait"]})
		return
	}
	succeed(map[string]any{"resume": req.Resume, "wait": req.Wait, "signals": req.Signals})
}

// fanout is the "fanout" mode (see the package's comment).
func fanout(req request, p params) {
	if req.Resume == 0 {
		wait := map[string]any{"children": fanoutChildren(p)}
		for _, k := range []string{"timeout"} {
			if raw, ok := p[k]; ok {
				wait[k] = raw
			}
		}
		if m := p.str("wait_mode", ""); m != "" {
			wait["mode"] = m
		}
		reply(map[string]any{"status": "suspend", "wait": wait})
		return
	}
	out := map[string]any{"resume": req.Resume, "wait": req.Wait, "children": len(req.Children)}
	ids, states, results, ok := []string{}, []string{}, []json.RawMessage{}, 0
	for _, c := range req.Children {
		ids, states, results = append(ids, c.ID), append(states, c.State), append(results, c.Result)
		if c.State == "succeeded" {
			ok++
		}
	}
	out["succeeded"], out["ids"], out["states"], out["results"] = ok, ids, states, results
	succeed(out)
}

// fanoutChildren is the fanout mode's children: params "children" as
// given, else n copies of "child" named c1…cN with params.i = position.
func fanoutChildren(p params) json.RawMessage {
	if raw, ok := p["children"]; ok {
		return raw
	}
	child := map[string]any{"agent": "testagent"}
	if raw, ok := p["child"]; ok {
		child = map[string]any{}
		if err := json.Unmarshal(raw, &child); err != nil {
			die(2, "testagent: child is not an object: %v", err)
		}
	}
	var out []map[string]any
	for i := 1; i <= p.int("n", 1); i++ {
		c := map[string]any{}
		for k, v := range child {
			c[k] = v
		}
		c["name"] = "c" + strconv.Itoa(i)
		if ps, isObj := child["params"].(map[string]any); isObj || child["params"] == nil {
			np := map[string]any{"i": i}
			for k, v := range ps {
				np[k] = v
			}
			c["params"] = np
		}
		out = append(out, c)
	}
	b, _ := json.Marshal(out)
	return b
}

// steps is the "steps" mode (see the package's comment).
func steps(req request, p params) {
	fd, err := strconv.Atoi(os.Getenv("AGENTQ_EVENTS_FD"))
	if err != nil {
		die(2, "testagent: no AGENTQ_EVENTS_FD")
	}
	events := os.NewFile(uintptr(fd), "events")
	var out []json.RawMessage
	called := 0
	for i := 1; i <= p.int("n", 1); i++ {
		name := "s" + strconv.Itoa(i)
		if data, ok := req.Steps[name]; ok {
			out = append(out, data)
			continue
		}
		data, usage := modelCall(p.str("url", ""), name)
		called++
		line, _ := json.Marshal(map[string]any{"type": "step", "name": name, "data": data, "usage": usage})
		if _, err := events.Write(append(line, '\n')); err != nil {
			die(2, "testagent: write step: %v", err)
		}
		out = append(out, data)
		if req.Attempt == 1 && i == p.int("fail_after", 0) {
			die(1, "%s", defaultStderr)
		}
	}
	succeed(map[string]any{"steps": out, "called": called})
}

// modelCall POSTs one step's call to the chat endpoint url and returns
// its reply's content (JSON) and usage.
func modelCall(url, step string) (json.RawMessage, json.RawMessage) {
	resp, err := http.Post(url, "application/json", strings.NewReader(`{"step":"`+step+`"}`))
	if err != nil {
		die(1, "%s", defaultStderr)
	}
	defer resp.Body.Close()
	var r struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
		Usage json.RawMessage `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || len(r.Choices) == 0 {
		die(1, "testagent: bad reply from the model: %v", err)
	}
	data, _ := json.Marshal(r.Choices[0].Message.Content)
	return data, r.Usage
}
