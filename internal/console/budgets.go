package console

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentq/agentq/internal/budget"
	"github.com/agentq/agentq/internal/inspect"
)

// budgetRow is a row of the Budgets page: a budget's state
// (budget.Status, as `inspector budget` reads it) and its units, ready to
// draw.
type budgetRow struct {
	budget.Status
	// Tokens and USD are its units (nil: it has no such unit).
	Tokens, USD *budgetUnit
	// Default says the tenant's budget is defaults.tenant's (each tenant
	// has a window of its own), not its own block's.
	Default bool
	// ResetsAt is when an exhausted budget has room again (by the
	// console's clock; zero: not exhausted).
	ResetsAt time.Time
}

// budgetUnit is one unit of a budget: used, limit and left, formatted,
// and the share used as the width of its bar (0–100).
type budgetUnit struct {
	Unit              budget.Unit
	Used, Limit, Left string
	Percent           int
	Full              bool
}

// budgetsPage serves GET /ui/budgets?offset=: the Budgets page, what
// `inspector budget` lists (inspect.FleetBudgetStatuses: every budget the
// config sets, and those of the tenants the config does not name that
// spent against defaults.tenant.budget in its window), a page of
// Options.PageSize at a time as the dead letters are (an offset past the
// end shows the last page): used in the window, left, a bar, exhausted
// and when it has room again; the counts above are the whole list's.
// Reset (behind a confirmation) forgets a window's debits as `inspector
// budget reset`.
func (c *Console) budgetsPage(rw http.ResponseWriter, r *http.Request, s session) error {
	ctx, cancel := c.bounded(r, 2)
	defer cancel()
	now := c.opts.Now()
	all, err := inspect.FleetBudgetStatuses(ctx, c.Redis, c.Budgets, c.Config, now)
	if err != nil {
		return err
	}
	exhausted := 0
	for _, st := range all {
		if st.Exhausted {
			exhausted++
		}
	}
	size, total := c.opts.PageSize, int64(len(all))
	offset := offsetParam(r.URL.Query())
	if int64(offset) >= total {
		offset = lastPageOffset(total, size)
	}
	shown := all[offset:min(offset+size, len(all))]
	rows := make([]budgetRow, 0, len(shown))
	for _, st := range shown {
		rows = append(rows, c.budgetRowOf(st, now))
	}
	c.render(rw, r, s, http.StatusOK, "budgets.html", "budgets", "Budgets", map[string]any{
		"Budgets": rows, "Total": total, "Exhausted": exhausted, "DeferMax": budget.DeferMax.String(),
		"Pager": newPager(total, offset, size, len(rows), c.budgetsLink), "Offset": offset,
	})
	return nil
}

// budgetsLink is the Budgets page at offset.
func (c *Console) budgetsLink(offset int) string {
	if offset > 0 {
		return c.base + "budgets?offset=" + strconv.Itoa(offset)
	}
	return c.base + "budgets"
}

// budgetRowOf draws st, a budget's state at now.
func (c *Console) budgetRowOf(st budget.Status, now time.Time) budgetRow {
	row := budgetRow{Status: st}
	if st.Kind == budget.Tenant {
		t, named := c.Config.Tenants[st.Name]
		row.Default = !named || t.Budget == nil
	}
	if st.Tokens > 0 {
		row.Tokens = unitOf(budget.Tokens, st.TokensUsed, st.Tokens, st.TokensLeft, func(n int64) string { return strconv.FormatInt(n, 10) })
	}
	if st.USD > 0 {
		row.USD = unitOf(budget.USD, budget.Micros(st.USDUsed), budget.Micros(st.USD), budget.Micros(st.USDLeft), dollars)
	}
	if st.Exhausted {
		row.ResetsAt = now.Add(st.ResetsIn)
	}
	return row
}

// unitOf draws one unit: used of limit, left, and the bar's width.
func unitOf(u budget.Unit, used, limit, left int64, format func(int64) string) *budgetUnit {
	p := 100
	if used < limit {
		p = int(used * 100 / limit)
	}
	return &budgetUnit{Unit: u, Used: format(used), Limit: format(limit), Left: format(left), Percent: p, Full: used >= limit}
}

// budgetReset serves POST /ui/budgets/reset (kind, name, offset): it
// forgets the debits of the window of a budget the config sets, as
// `inspector budget reset KIND NAME` (budget.Keeper.Reset), and returns to
// the page at offset (the one the form was on); a budget the config does
// not set is refused (400; the console has no --force).
func (c *Console) budgetReset(rw http.ResponseWriter, r *http.Request, s session) error {
	kind, err := budget.ParseKind(r.PostForm.Get("kind"))
	if err != nil {
		return httpError(http.StatusBadRequest, "Budget kind %q: it is tenant or agent.", r.PostForm.Get("kind"))
	}
	name := r.PostForm.Get("name")
	if len(name) > 1000 || strings.ContainsAny(name, "\r\n") {
		return httpError(http.StatusBadRequest, "That is not a tenant's or agent's name.")
	}
	b := inspect.ConfiguredBudget(c.Config, kind, name)
	if b == nil {
		return httpError(http.StatusBadRequest, "The config sets no budget for %s %q.", kind, name)
	}
	ctx, cancel := c.bounded(r, 1)
	defer cancel()
	if err := c.Budgets.Reset(ctx, kind, name); err != nil {
		return err
	}
	c.redirect(rw, r, s, c.budgetsLink(offsetParam(r.PostForm)), flashMsg{Kind: "budget-reset", Key: string(kind), ID: name})
	return nil
}
