package console

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/amount"
	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/broker/brokertest"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/tasks"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// chromiumPath finds headless Chromium: $AGENTQ_CHROMIUM, or chromium,
// chromium-browser, google-chrome on PATH (scripts/ensure-chromium.sh,
// which `make test` runs, installs Debian's chromium).
func chromiumPath(t *testing.T) string {
	if p := os.Getenv("AGENTQ_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no Chromium found: run scripts/ensure-chromium.sh (make test does) or set AGENTQ_CHROMIUM")
	return ""
}

// screenshotDir is where the browser test saves its screenshots:
// $AGENTQ_SCREENSHOTS, or console/.screenshots (git-ignored).
func screenshotDir(t *testing.T) string {
	dir := os.Getenv("AGENTQ_SCREENSHOTS")
	if dir == "" {
		dir = ".screenshots"
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

// fitsJS answers "" when nothing on the page is cut off at the window's
// width, else what is: the page scrolls sideways, a table is wider than
// its box (.scroll), or a button, field, chart or table reaches past
// either edge of the screen.
const fitsJS = `(() => {
  const W = window.innerWidth;
  if (document.documentElement.scrollWidth > W + 1) return 'the page scrolls sideways: ' + document.documentElement.scrollWidth + ' > ' + W;
  for (const s of document.querySelectorAll('main .scroll')) {
    if (s.scrollWidth > s.clientWidth + 1) return 'a table is wider than its box: ' + (s.querySelector('table') || s).id + ' ' + s.scrollWidth + ' > ' + s.clientWidth;
  }
  for (const el of document.querySelectorAll('main button, main input, main select, main svg, main table, main figure')) {
    const r = el.getBoundingClientRect();
    if (r.width === 0) continue;
    if (r.left < -1 || r.right > W + 1) return 'cut off: ' + el.outerHTML.slice(0, 100) + ' spans ' + Math.round(r.left) + '..' + Math.round(r.right) + ' of ' + W;
  }
  return '';
})()`

// TestBrowser drives headless Chromium through the console: log in, list
// dead letters and requeue one, search a task and read its history, trip
// and reset a breaker, reset a budget, every page at 1366×768 and the
// Overview (and more) at phone width, with no JavaScript error in the
// console log.
func TestBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("drives headless Chromium for seconds; skipped with -short (make unit)")
	}
	t.Parallel()
	exe := chromiumPath(t)
	shots := screenshotDir(t)
	f := newFixture(t, testToken)
	f.seedDeadLetters(t, 120)
	f.seedTask(t, "task-42")
	aliveWorker, goneWorker := f.seedWorkers(t)
	schedID := f.setSchedules(t)
	f.seedUsage(t)
	f.seedBudgets(t)
	_, err0 := f.client.Enqueue(context.Background(), tasks.Task{ID: "by-corr", Agent: "llm", CorrelationID: "order-7"})
	require.NoError(t, err0)
	_, err0 = f.client.Enqueue(context.Background(), tasks.Task{ID: "tree-top", Agent: "llm"}, tasks.ProcessIn(time.Hour))
	require.NoError(t, err0)
	spawn(t, f, &tasks.Envelope{ID: "tree-top", Agent: "llm", Queue: tasks.DefaultQueue}, []tasks.ChildSpec{{Agent: "tool"}, {Agent: "llm", Name: "review"}})
	brokertest.Seed(t, f.rdb, "bulk") // tenants on queue bulk: acme at its cap
	// A chart with something in it: an hour of synthetic minutes in Redis (the
	// sampler's real readings are TestSamplerLifecycle's).
	f.sampler.addSynthetic(t, time.Now(), time.Hour)

	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.WindowSize(1366, 768),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.Flag("disable-extensions", true),
		chromedp.UserDataDir(t.TempDir()))
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	ctx, cancel := context.WithTimeout(bctx, 90*time.Second)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(1366, 768), chromedp.Navigate("about:blank")))

	// Every error the pages log (console.error, uncaught exceptions, CSP
	// violations and failed loads from the browser log).
	var mu sync.Mutex
	var jsErrors []string
	msgs := chromedp.Console(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				mu.Lock()
				jsErrors = append(jsErrors, m.String()+" at "+m.URL)
				mu.Unlock()
			}
		}
	}()

	// shot saves the whole page (PNG); phone shots keep to the screen.
	shot := func(name string) {
		t.Helper()
		capture := chromedp.FullScreenshot(100)
		if strings.HasSuffix(name, "-phone") {
			capture = chromedp.CaptureScreenshot()
		}
		png, err := chromedp.Run(ctx, capture)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644))
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		require.NoError(t, err, sel)
		return s
	}
	eval := func(js string) bool {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js))
		require.NoError(t, err, js)
		return v
	}
	// fits checks that nothing on the page is cut off at the current
	// width: the page does not scroll sideways, no table is wider than its
	// box, and every button, field, chart and table lies within the screen.
	fits := func(page string) {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](fitsJS))
		require.NoError(t, err)
		require.Empty(t, v, "%s: something is cut off", page)
	}

	// clickAndLoad clicks a form's button and waits for the page the POST
	// redirects to (the old document is marked, so its flash does not count).
	clickAndLoad := func(sel string) {
		t.Helper()
		require.NoError(t, chromedp.Do(ctx,
			chromedp.SetAttributeValue(chromedp.CSS("body"), "data-old", "1"),
			chromedp.Click(chromedp.CSS(sel)),
			chromedp.WaitNotPresent(chromedp.CSS("body[data-old]")),
			chromedp.WaitVisible(chromedp.CSS(".flash")),
		), sel)
	}

	// Log in: the console sends us to the form, and back after it.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(f.url+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
	))
	require.True(t, eval(`!document.querySelector('header nav') && !document.querySelector('form[role=search]')`), "no nav or search before logging in")
	shot("login")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS("#token"), testToken),
		chromedp.Submit(chromedp.CSS("form.login")),
		chromedp.WaitVisible(chromedp.CSS("section.cards")),
	))
	require.Equal(t, "Overview", text("main h1"))
	for _, name := range []string{"Overview", "Dead letters", "Breakers", "Restarts", "Agents", "Schedules"} {
		require.Contains(t, text("header nav"), name)
	}
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(".chart polyline.s-pending"))))
	fits("the Overview at 1366")
	shot("overview")

	// Dead letters: the list pages through 120; requeue dl-120 and see it leave.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`header nav a[href="/ui/deadletters"]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-id="dl-120"]`)),
	))
	require.Equal(t, "120", text("#dl-total"))
	shot("deadletters")
	clickAndLoad(`tr[data-id="dl-120"] button.requeue`)
	require.True(t, eval(`document.querySelector('tr[data-id="dl-120"]') === null`))
	require.Contains(t, text(".flash"), "Requeued dl-120")
	require.Equal(t, "119", text("#dl-total"))
	_, err := f.dlq.Get(context.Background(), "dl-120")
	require.Error(t, err, "dl-120 is no longer a dead letter")
	v, err := f.store.Get(context.Background(), "dl-120")
	require.NoError(t, err)
	require.Equal(t, "pending", string(v.State))

	// Filter by agent, page on, open one.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(f.url+"/ui/deadletters?agent=tool&offset=50"),
		chromedp.WaitVisible(chromedp.CSS(`nav.pager`)),
	))
	require.Equal(t, "59", text("#dl-total"), "dl-120 (tool) was requeued")
	require.True(t, eval(`document.querySelectorAll('#deadletters tbody tr[data-id]').length === 9`))
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(f.url+"/ui/deadletter/dl-7"),
		chromedp.WaitVisible(chromedp.CSS(".timeline")),
	))
	require.Contains(t, text("pre.json"), `"report.pdf"`)
	shot("deadletter")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(f.url+"/ui/deadletters/bulk?action=requeue&class=invalid_request"),
		chromedp.WaitVisible(chromedp.CSS("p.confirm")),
	))
	require.Contains(t, text("main h1"), "Requeue 59 dead letters?")
	shot("bulk-confirm")

	// Task search from the header's box: state and history.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS(`header input[type=search]`), "task-42"),
		chromedp.Submit(chromedp.CSS(`header form.search`)),
		chromedp.WaitVisible(chromedp.CSS("#history .timeline")),
	))
	require.Equal(t, "task-42", text("#task-id"))
	require.Equal(t, "retrying", text("#task-state"))
	hist := text("#history")
	require.Contains(t, hist, "queued")
	require.Contains(t, hist, "retrying")
	require.Contains(t, hist, "context deadline exceeded after 30s")
	require.True(t, eval(`!!document.querySelector('form[action$="/cancel"] button')`), "a retrying task can be canceled")
	shot("task")

	// The Task page shows its events live: an output line, then the end.
	waitText := func(sel, want string) {
		t.Helper()
		require.Eventually(t, func() bool { return strings.Contains(text(sel), want) }, 20*time.Second, 50*time.Millisecond, "%s shows %q (has %q)", sel, want, text(sel))
	}
	waitText("#live-events", "retrying")
	live := record.Delivery{ID: "task-42", Attempt: 2}
	_, err = record.StoreOf(f.store).Apply(context.Background(), live, record.Started())
	require.NoError(t, err)
	_, _, err = record.StoreOf(f.store).Output(context.Background(), live, []record.Event{{Event: record.EventOutput, Data: []byte(`"half way"`)}})
	require.NoError(t, err)
	waitText("#live-events", `output "half way"`)
	_, err = record.StoreOf(f.store).Step(context.Background(), live, record.Step{Name: "plan", Data: []byte(`"outline"`), Usage: amount.Usage{TotalTokens: 100}})
	require.NoError(t, err)
	waitText("#live-events", "step attempt 2 plan (9 B) 100 tokens")
	_, err = record.StoreOf(f.store).Apply(context.Background(), live, record.Succeeded(record.Attempt{Attempt: 2}, []byte(`{"summary":"ok"}`)))
	require.NoError(t, err)
	waitText("#live-events", "succeeded")
	waitText("#task-state", "succeeded")
	waitText("#live-status", "ended")
	// The title's badge says what the State field says, and each event's
	// time is readable (milliseconds, not nanoseconds).
	require.Equal(t, "succeeded", text("#task-badge"), "the title's badge follows the end")
	require.True(t, eval(`document.querySelector('#task-badge').className === 'badge st-succeeded'`))
	require.True(t, eval(`!document.querySelector('form[action$="/cancel"]') && !document.querySelector('#signal')`), "an ended task has no Cancel or signal form")
	require.True(t, eval(`[...document.querySelectorAll('#live-events li')].length > 3 && [...document.querySelectorAll('#live-events li')].every(li => {
	  const t = li.querySelector('time');
	  return t && /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}Z$/.test(t.textContent) && t.title !== '';
	})`), "every live event has a readable time: %s", text("#live-events"))
	shot("task-live")
	require.NoError(t, chromedp.Do(ctx, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#history .timeline"))))
	require.Equal(t, "half way", text("#task-output"), "the ended task's output, server-rendered")
	require.Equal(t, "1", text("#task-steps"))
	require.Contains(t, text("#history .ev-step"), "plan")
	require.Contains(t, text("#history .ev-step"), "9 B")

	// A task waiting for a signal (a real worker's suspend): its page
	// shows the wait and a form; data that is not JSON is refused, the
	// form's signal resumes it and the page shows it resume and end.
	f.runApprover(t, "approvals")
	_, err = tasks.NewClient(f.rdb).Enqueue(context.Background(), tasks.Task{ID: "approve-1", Agent: "approver", Queue: "approvals"})
	require.NoError(t, err)
	f.waitState(t, "approve-1", tasks.StateWaiting)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(f.url+"/ui/tasks/approve-1"), chromedp.WaitVisible(chromedp.CSS("#signal-form"))))
	require.Contains(t, text("#task-wait"), "signal approve, timeout 1h0m0s")
	waitText("#live-events", "waiting attempt 1 signal approve, timeout 1h0m0s · due ")
	require.True(t, eval(`document.querySelector('#signal-form input[name=name]').value === "approve"`))
	shot("task-waiting")
	require.NoError(t, chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS("#signal-form textarea"), `{"approved": yes}`)))
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#signal-form button"))))
	waitText("#signal-form .signal-error", "Not sent: the data is not JSON")
	v, err = f.store.Get(context.Background(), "approve-1")
	require.NoError(t, err)
	require.Zero(t, v.Signals, "nothing sent")
	require.NoError(t, chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS("#signal-form textarea"), `{"approved": true}`)))
	clickAndLoad("#signal-form button")
	require.Contains(t, text(".flash"), "Sent signal approve to task approve-1: it waited for it and resumes now.")
	// The page after the POST may show the task live or ended already.
	v = f.waitState(t, "approve-1", tasks.StateSucceeded)
	require.JSONEq(t, `{"approval":{"approved":true}}`, string(v.Result))
	require.NoError(t, chromedp.Do(ctx, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#history .ev-resumed"))))
	require.Equal(t, "succeeded", text("#task-state"))
	require.Contains(t, text("#history .ev-resumed"), "resume 1 by signal")
	require.Contains(t, text("#history .ev-signal"), "approve")
	require.Contains(t, text("#task-wait"), "ended: resumed")
	shot("task-signaled")

	// Breakers: trip llm.example for 5m, then reset it. It has a history
	// (every timestamp and count filled in), as a breaker in use has.
	ms := time.Now().UnixMilli()
	require.NoError(t, f.rdb.HSet(context.Background(), rkeys.Breaker("llm.example"), "failure_count", 123456,
		"success_count", 9876543, "consecutive_failures", 17, "last_failure_at", ms-5000, "last_success_at", ms-60000).Err())
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`header nav a[href="/ui/breakers"]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-key="llm.example"]`)),
	))
	require.Equal(t, "closed", text(`tr[data-key="llm.example"] td.state`))
	clickAndLoad(`tr[data-key="llm.example"] button.trip`)
	require.Equal(t, "open", text(`tr[data-key="llm.example"] td.state`))
	snap, err := breaker.New(f.rdb).Get(context.Background(), "llm.example")
	require.NoError(t, err)
	require.Equal(t, breaker.StateOpen, snap.State)
	fits("the Breakers page at 1366")
	shot("breakers")
	clickAndLoad(`tr[data-key="llm.example"] button.reset`)
	require.Contains(t, text(".flash"), "reset")
	require.Equal(t, "closed", text(`tr[data-key="llm.example"] td.state`))

	// Agents and Restarts.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`header nav a[href="/ui/agents"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#agents`)),
	))
	require.Contains(t, text("#agents"), "llm.example")
	shot("agents")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`header nav a[href="/ui/restarts"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#restarts`)),
	))
	shot("restarts")

	// Workers: a live one and a gone one with its orphaned task, nothing
	// cut off at 1366×768 (the tables fit their boxes, the page its width).
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`header nav a[href="/ui/workers"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#worker-tasks`)),
	))
	require.Contains(t, text(`tr[data-id="`+aliveWorker+`"]`), "alive")
	require.Contains(t, text(`tr[data-id="`+goneWorker+`"]`), "gone")
	require.Contains(t, text(`#worker-tasks tr[data-id="task-orphan"] td.orphan`), "between")
	require.True(t, eval(`document.documentElement.scrollWidth <= window.innerWidth + 1`), "the Workers page scrolls sideways at 1366")
	require.True(t, eval(`[...document.querySelectorAll('.scroll')].every(s => s.scrollWidth <= s.clientWidth + 1)`),
		"a Workers table is cut off at 1366 (wider than its box)")
	require.True(t, eval(`document.querySelector('#workers-hint').offsetParent === null`), "no scroll hint at 1366")
	shot("workers")
	// Usage: the totals' charts and table, nothing cut off at 1366×768.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`header nav a[href="/ui/usage"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#usage`)),
		chromedp.WaitVisible(chromedp.CSS(`.chart rect.s-in`)),
	))
	require.Contains(t, text(`#usage tr[data-key="llm"]`), "2500")
	fits("the Usage page at 1366")
	shot("usage")
	// Budgets: acme exhausted, the bars, nothing cut off at 1366×768;
	// reset llm's (confirm answered yes).
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`header nav a[href="/ui/budgets"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#budgets svg.meter`)),
	))
	require.Contains(t, text(`#budgets tr[data-kind="tenant"][data-name="acme"] td.state`), "exhausted")
	require.Contains(t, text(`#budgets tr[data-kind="tenant"][data-name="beta"] td.tokens`), "4700 left")
	fits("the Budgets page at 1366")
	shot("budgets")
	require.True(t, eval(`(window.confirm = () => true, true)`))
	clickAndLoad(`#budgets tr[data-kind="agent"][data-name="llm"] button.reset`)
	require.Contains(t, text(".flash"), "Budget of agent llm reset")
	require.Contains(t, text(`#budgets tr[data-kind="agent"][data-name="llm"] td.usd`), "$0.05 left")
	// A child's page: its parent linked, the run tree with it highlighted.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(f.url+"/ui/tasks/tree-top.review"),
		chromedp.WaitVisible(chromedp.CSS(`#tree tr.current`)),
	))
	require.Equal(t, "tree-top", text("#task-parent a"))
	require.Equal(t, "tree-top.review", text("#tree tr.current a"))
	fits("a child task's page with its run tree at 1366")
	shot("task-tree")
	// Tasks: the Overview's pending count of a queue lists its tasks; the
	// search box finds a task by correlation ID; pause and resume the
	// queue from its row (confirm answered yes).
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(f.url+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-queue="default"]`)),
		chromedp.Click(chromedp.CSS(`tr[data-queue="default"] a[href$="state=pending"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#tasks`)),
	))
	require.Contains(t, text("main h1"), "default")
	require.Contains(t, text("#tasks"), "dl-120", "the requeued dead letter is pending")
	require.True(t, eval(`document.documentElement.scrollWidth <= window.innerWidth + 1`), "the task list scrolls sideways at 1366")
	shot("tasks")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.SetAttributeValue(chromedp.CSS("body"), "data-old", "1"),
		chromedp.SendKeys(chromedp.CSS(`header input[type=search]`), "order-7"),
		chromedp.Submit(chromedp.CSS(`header form.search`)),
		chromedp.WaitNotPresent(chromedp.CSS("body[data-old]")),
		chromedp.WaitVisible(chromedp.CSS(`#tasks a[href$="/tasks/by-corr"]`)),
	))
	require.True(t, eval(`document.querySelector('input[name=correlation_id]').value === "order-7"`), "the search lists the correlation ID's tasks")
	require.True(t, eval(`document.querySelectorAll('#tasks tbody tr').length === 1`), "only by-corr has correlation ID order-7")
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(f.url+"/ui/"), chromedp.WaitVisible(chromedp.CSS(`tr[data-queue="default"]`))))
	require.True(t, eval(`(window.confirm = () => true, true)`))
	clickAndLoad(`tr[data-queue="default"] button.pause`)
	require.Contains(t, text(".flash"), "paused")
	require.Contains(t, text(`tr[data-queue="default"]`), "paused")
	paused, err := f.rdb.Exists(context.Background(), "asynq:{default}:paused").Result()
	require.NoError(t, err)
	require.EqualValues(t, 1, paused)
	shot("overview-paused")
	require.True(t, eval(`(window.confirm = () => true, true)`))
	clickAndLoad(`tr[data-queue="default"] button.resume`)
	require.Contains(t, text(".flash"), "resumed")

	// Tenants: acme at its cap on queue bulk, nothing cut off at 1366×768.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`header nav a[href="/ui/tenants"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#tenants`)),
	))
	require.Contains(t, text(`tr[data-queue="bulk"][data-tenant="acme"] td.capped`), "at cap")
	require.Contains(t, text(`tr[data-queue="bulk"][data-tenant=""] td.tenant`), "(default)")
	require.True(t, eval(`document.documentElement.scrollWidth <= window.innerWidth + 1`), "the Tenants page scrolls sideways at 1366")
	require.True(t, eval(`[...document.querySelectorAll('.scroll')].every(s => s.scrollWidth <= s.clientWidth + 1)`),
		"the Tenants table is cut off at 1366 (wider than its box)")
	shot("tenants")

	// Schedules: the last fired task, linked, and its state; nothing cut off.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`header nav a[href="/ui/schedules"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#schedules`)),
	))
	require.Contains(t, text(`#schedules tr[data-name="beat"] td.task`), schedID)
	require.Equal(t, "pending", text(`#schedules tr[data-name="beat"] td.state`))
	require.True(t, eval(`document.documentElement.scrollWidth <= window.innerWidth + 1`), "the Schedules page scrolls sideways at 1366")
	shot("schedules")

	// Phone width: the Overview still fits (nothing wider than the screen).
	require.NoError(t, chromedp.Do(ctx,
		chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile),
		chromedp.Navigate(f.url+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS("section.cards")),
	))
	require.True(t, eval(`document.documentElement.scrollWidth <= window.innerWidth + 1`), "the Overview scrolls sideways at phone width")
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(".chart polyline.s-pending"))))
	fits("the Overview at phone width")
	shot("overview-phone")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(f.url+"/ui/breakers"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-key="llm.example"] button.trip`)),
	))
	fits("the Breakers page at phone width")
	shot("breakers-phone")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(f.url+"/ui/deadletters"),
		chromedp.WaitVisible(chromedp.CSS("#deadletters")),
	))
	require.True(t, eval(`document.documentElement.scrollWidth <= window.innerWidth + 1`), "the dead letters scroll sideways at phone width")
	shot("deadletters-phone")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(f.url+"/ui/workers"),
		chromedp.WaitVisible(chromedp.CSS("#worker-tasks")),
	))
	require.True(t, eval(`document.documentElement.scrollWidth <= window.innerWidth + 1`), "the Workers page scrolls sideways at phone width")
	require.True(t, eval(`!!document.querySelector('header nav a[href="/ui/workers"]')`), "the Workers link at phone width")
	// Its tables scroll inside their boxes: a hint says so.
	require.True(t, eval(`document.querySelector('#workers').parentElement.scrollWidth > document.querySelector('#workers').parentElement.clientWidth`),
		"the Workers table is wider than the phone's screen")
	require.True(t, eval(`(r => r.width > 0 && r.right <= window.innerWidth)(document.querySelector('#workers-hint').getBoundingClientRect())`),
		"the scroll hint is shown at phone width")
	require.Contains(t, text("#workers-hint"), "Scroll the table → for more columns")
	shot("workers-phone")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(f.url+"/ui/usage?by=tenant&since=168h0m0s"),
		chromedp.WaitVisible(chromedp.CSS("#usage")),
		chromedp.WaitVisible(chromedp.CSS(`.chart rect.s-cost`)),
	))
	require.Contains(t, text(`#usage tr[data-key="acme"]`), "acme")
	fits("the Usage page at phone width")
	shot("usage-phone")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(f.url+"/ui/budgets"),
		chromedp.WaitVisible(chromedp.CSS(`#budgets tr[data-name="acme"] button.reset`)),
	))
	require.Contains(t, text(`#budgets tr[data-kind="tenant"][data-name="acme"] td.state`), "exhausted")
	require.True(t, eval(`!!document.querySelector('header nav a[href="/ui/budgets"]')`), "the Budgets link at phone width")
	fits("the Budgets page at phone width")
	shot("budgets-phone")
	for _, page := range []string{"tasks", "tasks?queue=default&state=pending"} {
		require.NoError(t, chromedp.Do(ctx,
			chromedp.Navigate(f.url+"/ui/"+page),
			chromedp.WaitVisible(chromedp.CSS("#tasks")),
		))
		require.True(t, eval(`document.documentElement.scrollWidth <= window.innerWidth + 1`), "%s scrolls sideways at phone width", page)
	}
	shot("tasks-phone")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(f.url+"/ui/tasks/by-corr"),
		chromedp.Click(chromedp.CSS("details#signal summary")),
		chromedp.WaitVisible(chromedp.CSS("#signal-form textarea")),
	))
	fits("a task's page with its signal form at phone width")
	shot("task-signal-phone")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(f.url+"/ui/tenants"),
		chromedp.WaitVisible(chromedp.CSS("#tenants")),
	))
	require.True(t, eval(`document.documentElement.scrollWidth <= window.innerWidth + 1`), "the Tenants page scrolls sideways at phone width")
	require.True(t, eval(`!!document.querySelector('header nav a[href="/ui/tenants"]')`), "the Tenants link at phone width")
	shot("tenants-phone")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(f.url+"/ui/schedules"),
		chromedp.WaitVisible(chromedp.CSS("#schedules")),
	))
	require.True(t, eval(`document.documentElement.scrollWidth <= window.innerWidth + 1`), "the Schedules page scrolls sideways at phone width")
	require.True(t, eval(`[...document.querySelectorAll('#schedules td')].every(td => td.getBoundingClientRect().right <= window.innerWidth + 1)`),
		"a cell of the Schedules page is cut off at phone width")
	require.Contains(t, text(`#schedules tr[data-name="beat"] td.task`), schedID)
	shot("schedules-phone")

	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, strings.Join(jsErrors, "\n"), "JavaScript errors in the console log")
}
