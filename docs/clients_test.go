package docs

import (
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A client's public surface, read from its sources: what docs/clients.md
// and the client's README must each name.
type clientAPI struct {
	readme    string   // the client's README, from this directory
	functions []string // client methods and exported functions: named as a call, `name(…)`
	classes   []string // error classes: named as `Name`
}

var (
	pyMethodRE  = regexp.MustCompile(`^    (?:async )?def ([a-z]\w*)\(`)
	pyClassRE   = regexp.MustCompile(`(?m)^class (\w+)\(`)
	pyAllRE     = regexp.MustCompile(`(?s)__all__ = \[(.*?)\]`)
	quotedRE    = regexp.MustCompile(`"(\w+)"`)
	tsMethodRE  = regexp.MustCompile(`^  (?:async )?\*?([a-z]\w*)(?:<[^>]*>)?\(`)
	tsClassRE   = regexp.MustCompile(`(?m)^export class (\w+)|^export \{([^}]*)\};`)
	tsExportsRE = regexp.MustCompile(`(?m)^export \{([^}]*)\} from`)
	tsFuncRE    = regexp.MustCompile(`(?m)^export (?:async )?function (\w+)`)
	asNameRE    = regexp.MustCompile(`\bas (\w+)`)
)

func readSource(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(data)
}

// classBody returns the lines of the class that opens with the line
// header, up to the next line that is not indented (Python) or is the
// closing "}" (TypeScript).
func classBody(t *testing.T, src, header string) []string {
	t.Helper()
	lines := strings.Split(src, "\n")
	for i, line := range lines {
		if !strings.HasPrefix(line, header) {
			continue
		}
		end := i + 1
		for end < len(lines) && (lines[end] == "" || strings.HasPrefix(lines[end], " ") || strings.HasPrefix(lines[end], "\t")) {
			end++
		}
		return lines[i+1 : end]
	}
	require.Failf(t, "no class", "%q not found", header)
	return nil
}

// pythonMethods: the public methods (no leading _) of a Python class.
func pythonMethods(t *testing.T, path, class string) []string {
	t.Helper()
	var out []string
	for _, line := range classBody(t, readSource(t, path), "class "+class) {
		if m := pyMethodRE.FindStringSubmatch(line); m != nil {
			out = append(out, m[1])
		}
	}
	require.NotEmpty(t, out, "%s: class %s has no public method", path, class)
	return out
}

func pythonAPI(t *testing.T) clientAPI {
	t.Helper()
	const pkg = "../clients/python/agentq/"
	api := clientAPI{readme: "../clients/python/README.md"}
	api.functions = pythonMethods(t, pkg+"client.py", "Client")
	for _, m := range pythonMethods(t, pkg+"aio.py", "AsyncClient") {
		if !slices.Contains(api.functions, m) { // the same methods, and aclose
			api.functions = append(api.functions, m)
		}
	}
	all := pyAllRE.FindStringSubmatch(readSource(t, pkg+"__init__.py"))
	require.NotNil(t, all, "agentq/__init__.py has no __all__")
	for _, m := range quotedRE.FindAllStringSubmatch(all[1], -1) {
		if n := m[1]; n[0] >= 'a' && n[0] <= 'z' { // go_duration, verify_webhook, …
			api.functions = append(api.functions, n)
		}
	}
	for _, m := range pyClassRE.FindAllStringSubmatch(readSource(t, pkg+"errors.py"), -1) {
		api.classes = append(api.classes, m[1])
	}
	return api
}

// typescriptMethods: the public methods of the Client class (not private,
// static, #private or marked @internal).
func typescriptMethods(t *testing.T, src string) []string {
	t.Helper()
	var out []string
	internal := false
	for _, line := range classBody(t, src, "export class Client ") {
		if strings.Contains(line, "@internal") {
			internal = true
			continue
		}
		if m := tsMethodRE.FindStringSubmatch(line); m != nil {
			if !internal && m[1] != "constructor" {
				out = append(out, m[1])
			}
			internal = false
		}
	}
	require.NotEmpty(t, out, "the TypeScript Client has no public method")
	return out
}

func typescriptAPI(t *testing.T) clientAPI {
	t.Helper()
	const src = "../clients/typescript/src/"
	api := clientAPI{readme: "../clients/typescript/README.md"}
	api.functions = typescriptMethods(t, readSource(t, src+"client.ts"))
	for _, m := range tsExportsRE.FindAllStringSubmatch(readSource(t, src+"index.ts"), -1) {
		for _, name := range strings.Split(m[1], ",") {
			if n := strings.TrimSpace(name); n != "" && n[0] >= 'a' && n[0] <= 'z' && !strings.HasPrefix(n, "type ") {
				api.functions = append(api.functions, n) // goDuration, verifyWebhook, …
			}
		}
	}
	errs := readSource(t, src+"errors.ts")
	for _, m := range tsFuncRE.FindAllStringSubmatch(errs, -1) {
		api.functions = append(api.functions, m[1])
	}
	for _, m := range tsClassRE.FindAllStringSubmatch(errs, -1) {
		if m[1] != "" {
			api.classes = append(api.classes, m[1])
		}
		for _, a := range asNameRE.FindAllStringSubmatch(m[2], -1) {
			api.classes = append(api.classes, a[1]) // TaskFailed, TaskCanceled
		}
	}
	return api
}

// docSpans returns the inline `code spans` of a Markdown text outside its
// fenced blocks (a span may wrap across lines).
func docSpans(text string) []string {
	p := prose(text)
	nums := make([]int, 0, len(p))
	for n := range p {
		nums = append(nums, n)
	}
	sort.Ints(nums)
	lines := make([]string, len(nums))
	for i, n := range nums {
		lines[i] = p[n]
	}
	var spans []string
	for _, m := range backtickRE.FindAllStringSubmatch(strings.Join(lines, "\n"), -1) {
		spans = append(spans, strings.Join(strings.Fields(m[1]), " "))
	}
	return spans
}

// undocumented lists what of api the Markdown text (at path) does not
// name: a function unless a code span calls it (`enqueue(…)`,
// `wait<T>(id)`, `await verifyWebhook(…)`, `aq.signal(…)`), a class
// unless a code span starts with it (`BudgetExhausted`, `AgentError(msg)`).
func undocumented(path, text string, api clientAPI) []string {
	spans := docSpans(text)
	named := func(re *regexp.Regexp) bool {
		for _, s := range spans {
			if re.MatchString(s) {
				return true
			}
		}
		return false
	}
	var missing []string
	for _, f := range api.functions {
		if !named(regexp.MustCompile(`^(?:await )?(?:[\w.()]*\.)?` + f + `(?:<[^>]*>)?\(`)) {
			missing = append(missing, path+": the method or function "+f+"() is not named (as `"+f+"(…)`)")
		}
	}
	for _, c := range api.classes {
		if !named(regexp.MustCompile(`^(?:[\w.]*\.)?` + c + `\b`)) {
			missing = append(missing, path+": the error class "+c+" is not named (as `"+c+"`)")
		}
	}
	return missing
}

// TestClientsDocumentEveryMethodAndError: docs/clients.md and each
// client's README name every public method of the client classes
// (Client, AsyncClient), every exported function and every error class,
// as the sources have them (the READMEs and the page once left
// BudgetExhausted and seven methods out).
func TestClientsDocumentEveryMethodAndError(t *testing.T) {
	t.Parallel()
	guide := readSource(t, "clients.md")
	var missing []string
	for _, api := range []clientAPI{pythonAPI(t), typescriptAPI(t)} {
		require.Contains(t, api.classes, "APIError", "the error classes were not read")
		missing = append(missing, undocumented("docs/clients.md", guide, api)...)
		missing = append(missing, undocumented(strings.TrimPrefix(api.readme, "../"), readSource(t, api.readme), api)...)
	}
	require.Empty(t, missing, "undocumented client API:\n%s", strings.Join(missing, "\n"))
}

// TestClientsCheckerFindsGaps: the checker reports a method and a class a
// page does not name, and takes a call or a class in any code span.
func TestClientsCheckerFindsGaps(t *testing.T) {
	t.Parallel()
	api := clientAPI{functions: []string{"wait", "tasks", "verifyWebhook", "aclose"}, classes: []string{"BudgetExhausted", "NotFound"}}
	text := "`wait<T>(id)` and `await verifyWebhook(h, b,\nsecret)`; `NotFound` (404).\n```py\naq.tasks()\nBudgetExhausted\n```\n`aq.aclose()`\nthe tasks, `tasks` and BudgetExhausted in prose\n"
	require.Equal(t, []string{
		"p.md: the method or function tasks() is not named (as `tasks(…)`)",
		"p.md: the error class BudgetExhausted is not named (as `BudgetExhausted`)",
	}, undocumented("p.md", text, api))
}

// TestClientsAPIIsRead: the source readers find what the clients have.
func TestClientsAPIIsRead(t *testing.T) {
	t.Parallel()
	py, ts := pythonAPI(t), typescriptAPI(t)
	for _, f := range []string{"enqueue", "iter_tasks", "pause_queue", "usage", "aclose", "verify_webhook", "task_result"} {
		require.Contains(t, py.functions, f)
	}
	require.Contains(t, py.classes, "BudgetExhausted")
	for _, f := range []string{"enqueue", "wait", "iterTasks", "resumeQueue", "workers", "verifyWebhook", "fromReply"} {
		require.Contains(t, ts.functions, f)
	}
	require.NotContains(t, ts.functions, "pause", "an @internal method")
	require.NotContains(t, ts.functions, "headers", "a private method")
	for _, c := range []string{"BudgetExhaustedError", "TaskFailed", "TaskFailedError", "APIError"} {
		require.Contains(t, ts.classes, c)
	}
}
