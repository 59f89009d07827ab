package console

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/budget"
	"github.com/agentq/agentq/internal/inspect"
	"github.com/agentq/agentq/internal/usage"
)

// seedBudgets debits testConfig's budgets as workers would (budget.Keeper.
// Debit, and the usage totals the workers' recorders keep): acme 1200
// tokens of its 1000 (exhausted), tenant beta — not named, under
// defaults.tenant — 300 tokens and $0.25, agent llm $0.02; tenant gamma
// has usage but no debit in its window.
func (f *fixture) seedBudgets(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	k := budget.New(f.rdb)
	of := func(agent, tenant string) []budget.Budget { return inspect.BudgetsOf(f.cfg, agent, tenant) }
	require.NoError(t, k.Debit(ctx, usage.Usage{TotalTokens: 1200}, of("tool", "acme")...))
	require.NoError(t, k.Debit(ctx, usage.Usage{TotalTokens: 300, CostUSD: 0.25, Priced: true}, of("tool", "beta")...))
	require.NoError(t, k.Debit(ctx, usage.Usage{TotalTokens: 40, CostUSD: 0.02, Priced: true}, *inspect.ConfiguredBudget(f.cfg, budget.Agent, "llm")))
	rec := usage.NewRecorder(f.rdb, usage.RecorderOptions{})
	for _, tenant := range []string{"beta", "gamma"} {
		rec.Add(usage.Entry{Agent: "tool", Tenant: tenant, At: time.Now(), Usage: usage.Usage{TotalTokens: 300}})
	}
	require.NoError(t, rec.Flush(ctx))
}

// TestBudgetsPage: the Budgets page shows every budget the config sets
// and beta's (found in the usage totals, debited under defaults.tenant),
// not gamma's (no debit): used, limit, left, a bar, acme exhausted with
// when it has room again; Reset, behind a confirmation with CSRF, forgets
// acme's window as `inspector budget reset` does; a budget the config
// does not set cannot be reset.
func TestBudgetsPage(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	f.seedBudgets(t)
	auth := "Authorization: Bearer " + testToken
	r := call(t, "GET", f.url+"/ui/budgets", nil, auth)
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Contains(t, r.body, `<a href="/ui/budgets" aria-current="page">Budgets</a>`)
	require.Contains(t, r.body, `<span id="budgets-count">4</span> budgets, <strong id="budgets-exhausted">1 exhausted</strong>`)
	require.Regexp(t, `(?s)data-kind="tenant" data-name="".*data-kind="tenant" data-name="acme".*data-kind="tenant" data-name="beta".*data-kind="agent" data-name="llm"`, r.body)
	require.NotContains(t, r.body, `data-name="gamma"`, "gamma has usage but no debit")
	require.NotContains(t, r.body, `data-name="tool"`, "tool has no budget")

	row := func(kind, name string) string {
		t.Helper()
		m := regexp.MustCompile(`(?s)<tr data-kind="` + kind + `" data-name="` + name + `"[^>]*>.*?</tr>`).FindString(r.body)
		require.NotEmpty(t, m, "%s %q", kind, name)
		return m
	}
	acme := row("tenant", "acme")
	require.Contains(t, acme, `class="failing"`)
	require.Contains(t, acme, `<td class="per" data-label="Per">1h0m0s</td>`)
	require.Contains(t, acme, `<span class="used">1200</span> / <span class="limit">1000</span>`)
	require.Contains(t, acme, `<rect class="fill full" width="100" height="6"/>`)
	require.Contains(t, acme, `<span class="left">0 left</span>`)
	require.Contains(t, acme, `<td class="unit usd" data-label="Cost">–</td>`)
	require.Contains(t, acme, `<span class="badge st-open">exhausted</span>`)
	require.Regexp(t, `<td class="resets t" data-label="Room again"><span>in (59m\d+s|1h0m0s) <span class="note">\(\d{4}-`, acme)
	require.NotContains(t, acme, "(defaults.tenant)")
	require.Contains(t, acme, `data-confirm="Reset the budget of tenant acme?`)

	beta := row("tenant", "beta")
	require.Contains(t, beta, `<span class="note">(defaults.tenant)</span>`)
	require.Contains(t, beta, `<td class="per" data-label="Per">24h0m0s</td>`)
	require.Contains(t, beta, `<span class="used">300</span> / <span class="limit">5000</span>`)
	require.Contains(t, beta, `<rect class="fill" width="6" height="6"/>`)
	require.Contains(t, beta, `<span class="left">4700 left</span>`)
	require.Contains(t, beta, `<span class="used">$0.25</span> / <span class="limit">$1.00</span>`)
	require.Contains(t, beta, `<rect class="fill" width="25" height="6"/>`)
	require.Contains(t, beta, `<span class="left">$0.75 left</span></div>`)
	require.Contains(t, beta, `<span class="badge st-closed">has room</span>`)
	require.Contains(t, beta, `data-label="Room again">–</td>`)

	dflt := row("tenant", "")
	require.Contains(t, dflt, `<em>(default)</em>`)
	require.Contains(t, dflt, `<span class="used">0</span> / <span class="limit">5000</span>`)

	llm := row("agent", "llm")
	require.Contains(t, llm, `<td class="unit tokens" data-label="Tokens">–</td>`)
	require.Contains(t, llm, `<span class="used">$0.02</span> / <span class="limit">$0.05</span>`)
	require.Contains(t, llm, `<rect class="fill" width="40" height="6"/>`)
	require.Contains(t, llm, `<span class="left">$0.03 left</span>`)

	// Reset acme from a logged-in browser: CSRF and origin checked, a
	// flash, and the window is empty (what inspector budget reads).
	cookie := login(t, f)
	page := call(t, "GET", f.url+"/ui/budgets", nil, cookie)
	require.Equal(t, http.StatusOK, page.status)
	form := url.Values{"csrf": {csrfOf(t, page.body)}, "kind": {"tenant"}, "name": {"acme"}}
	r = call(t, "POST", f.url+"/ui/budgets/reset", url.Values{"kind": {"tenant"}, "name": {"acme"}}, cookie, "Origin: "+f.url)
	require.Equal(t, http.StatusForbidden, r.status, "no CSRF token")
	r = call(t, "POST", f.url+"/ui/budgets/reset", form, cookie, "Origin: "+f.url)
	require.Equal(t, http.StatusSeeOther, r.status, r.body)
	require.Equal(t, "/ui/budgets?done=budget-reset", r.header.Get("Location"))
	r = call(t, "GET", f.url+r.header.Get("Location"), nil, cookie)
	require.Contains(t, r.body, `Budget of tenant acme reset`)
	require.Contains(t, r.body, `<span id="budgets-count">4</span> budgets.`)
	require.Contains(t, row("tenant", "acme"), `<span class="used">0</span> / <span class="limit">1000</span>`)
	st, err := budget.New(f.rdb).Status(context.Background(), *inspect.ConfiguredBudget(f.cfg, budget.Tenant, "acme"))
	require.NoError(t, err)
	require.Zero(t, st.TokensUsed)
	require.False(t, st.Exhausted)

	// What the config sets no budget for, and a made-up kind, are refused.
	r = call(t, "POST", f.url+"/ui/budgets/reset", url.Values{"kind": {"agent"}, "name": {"tool"}}, auth)
	require.Equal(t, http.StatusBadRequest, r.status)
	require.Contains(t, r.body, `no budget for agent &#34;tool&#34;`)
	r = call(t, "POST", f.url+"/ui/budgets/reset", url.Values{"kind": {"queue"}, "name": {"default"}}, auth)
	require.Equal(t, http.StatusBadRequest, r.status)
	r = call(t, "POST", f.url+"/ui/budgets/reset", url.Values{"kind": {"agent"}, "name": {"llm"}}, auth)
	require.Equal(t, http.StatusSeeOther, r.status, "a script resets with the bearer token")
}

// TestBudgetsPaged: with more budgets than a page (250 tenants under
// defaults.tenant with debits, beside the config's), the Budgets page
// shows a page's worth, its counts the whole list's, and links to the
// next; following them shows every budget once, in order, each page's body
// bounded; an offset past the end shows the last page; Reset returns to
// the page it was pressed on.
func TestBudgetsPaged(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	ctx := context.Background()
	k := budget.New(f.rdb)
	rec := usage.NewRecorder(f.rdb, usage.RecorderOptions{})
	want := []string{"tenant/", "tenant/acme"}
	for i := range 250 {
		tenant := fmt.Sprintf("t-%03d", i)
		require.NoError(t, k.Debit(ctx, usage.Usage{TotalTokens: 10}, inspect.BudgetsOf(f.cfg, "tool", tenant)...))
		rec.Add(usage.Entry{Agent: "tool", Tenant: tenant, At: time.Now(), Usage: usage.Usage{TotalTokens: 10}})
		want = append(want, "tenant/"+tenant)
	}
	require.NoError(t, rec.Flush(ctx))
	want = append(want, "agent/llm")

	bearer := "Authorization: Bearer " + testToken
	rowRE := regexp.MustCompile(`<tr data-kind="(\w+)" data-name="([^"]*)"`)
	nextRE := regexp.MustCompile(`<a href="([^"]+)" rel="next">`)
	var got []string
	next, pages := "/ui/budgets", 0
	for next != "" {
		r := call(t, "GET", f.url+html.UnescapeString(next), nil, bearer)
		require.Equal(t, http.StatusOK, r.status, r.body)
		pages++
		require.Less(t, len(r.body), 96<<10, "page %d: a page's body is bounded", pages)
		require.Contains(t, r.body, `<span id="budgets-count">253</span> budgets.`, "the counts are the whole list's")
		require.Contains(t, r.body, fmt.Sprintf("(page %d of 6)", pages))
		rows := rowRE.FindAllStringSubmatch(r.body, -1)
		if pages < 6 {
			require.Len(t, rows, DefaultPageSize, "page %d", pages)
		}
		for _, m := range rows {
			got = append(got, m[1]+"/"+m[2])
		}
		next = ""
		if m := nextRE.FindStringSubmatch(r.body); m != nil {
			next = m[1]
		}
		require.LessOrEqual(t, pages, 6, "the pages end")
	}
	require.Equal(t, want, got, "every budget once, in order")

	r := call(t, "GET", f.url+"/ui/budgets?offset=100000", nil, bearer)
	require.Equal(t, http.StatusOK, r.status)
	require.Contains(t, r.body, "251–253 (page 6 of 6)", "past the end: the last page")

	// Reset t-120 from page 3: back on page 3.
	cookie := login(t, f)
	page := call(t, "GET", f.url+"/ui/budgets?offset=100", nil, cookie)
	require.Contains(t, page.body, `data-name="t-120"`)
	require.Contains(t, page.body, `<input type="hidden" name="offset" value="100">`)
	form := url.Values{"csrf": {csrfOf(t, page.body)}, "kind": {"tenant"}, "name": {"t-120"}, "offset": {"100"}}
	r = call(t, "POST", f.url+"/ui/budgets/reset", form, cookie, "Origin: "+f.url)
	require.Equal(t, http.StatusSeeOther, r.status, r.body)
	require.Equal(t, "/ui/budgets?offset=100&done=budget-reset", r.header.Get("Location"))
}
