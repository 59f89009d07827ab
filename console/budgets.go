package console

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentq/agentq/budget"
	"github.com/agentq/agentq/inspect"
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

// budgetsPage is the Budgets page: what `inspector budget` lists
// (inspect.FleetBudgetStatuses: every budget the config sets, and those of
// the tenants the config does not name that spent against
// defaults.tenant.budget in its window): used in the window, left, a bar,
// exhausted and when it has room again; Reset (behind a
// confirmation) forgets a window's debits as `inspector budget reset`.
func (c *Console) budgetsPage(rw http.ResponseWriter, r *http.Request, s session) error {
	ctx, cancel := c.bounded(r, 2)
	defer cancel()
	now := c.opts.Now()
	all, err := inspect.FleetBudgetStatuses(ctx, c.rdb, c.budgets, c.cfg, now)
	if err != nil {
		return err
	}
	rows := make([]budgetRow, 0, len(all))
	exhausted := 0
	for _, st := range all {
		row := budgetRow{Status: st}
		if st.Kind == budget.Tenant {
			t, named := c.cfg.Tenants[st.Name]
			row.Default = !named || t.Budget == nil
		}
		if st.Tokens > 0 {
			row.Tokens = unitOf(budget.Tokens, st.TokensUsed, st.Tokens, st.TokensLeft, func(n int64) string { return strconv.FormatInt(n, 10) })
		}
		if st.USD > 0 {
			row.USD = unitOf(budget.USD, budget.Micros(st.USDUsed), budget.Micros(st.USD), budget.Micros(st.USDLeft), dollars)
		}
		if st.Exhausted {
			exhausted++
			row.ResetsAt = now.Add(st.ResetsIn)
		}
		rows = append(rows, row)
	}
	c.render(rw, r, s, http.StatusOK, "budgets.html", "budgets", "Budgets", map[string]any{
		"Budgets": rows, "Exhausted": exhausted, "DeferMax": budget.DeferMax.String(),
	})
	return nil
}

// unitOf draws one unit: used of limit, left, and the bar's width.
func unitOf(u budget.Unit, used, limit, left int64, format func(int64) string) *budgetUnit {
	p := 100
	if used < limit {
		p = int(used * 100 / limit)
	}
	return &budgetUnit{Unit: u, Used: format(used), Limit: format(limit), Left: format(left), Percent: p, Full: used >= limit}
}

// budgetReset serves POST /ui/budgets/reset (kind, name): it forgets the
// debits of the window of a budget the config sets, as `inspector budget
// reset KIND NAME` (budget.Keeper.Reset); a budget the config does not set
// is refused (400; the console has no --force).
func (c *Console) budgetReset(rw http.ResponseWriter, r *http.Request, s session) error {
	kind, err := budget.ParseKind(r.PostForm.Get("kind"))
	if err != nil {
		return httpError(http.StatusBadRequest, "Budget kind %q: it is tenant or agent.", r.PostForm.Get("kind"))
	}
	name := r.PostForm.Get("name")
	if len(name) > 1000 || strings.ContainsAny(name, "\r\n") {
		return httpError(http.StatusBadRequest, "That is not a tenant's or agent's name.")
	}
	b := inspect.ConfiguredBudget(c.cfg, kind, name)
	if b == nil {
		return httpError(http.StatusBadRequest, "The config sets no budget for %s %q.", kind, name)
	}
	ctx, cancel := c.bounded(r, 1)
	defer cancel()
	if err := c.budgets.Reset(ctx, kind, name); err != nil {
		return err
	}
	c.redirect(rw, r, s, c.base+"budgets", flashMsg{Kind: "budget-reset", Key: string(kind), ID: name})
	return nil
}
