package console

import (
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/inspect"
)

// tenantRow is a row of the Tenants page.
type tenantRow struct {
	inspect.Tenant
	// Name is the tenant's name ("": the default tenant); .Tenant is the
	// embedded struct.
	Name string
	// WaitedMS is how long its oldest waiting run has waited (0: none).
	WaitedMS int64
	// Prios is its waiting runs by priority ("high 2, normal 5"), when
	// they are not all normal.
	Prios string
}

// tenants is the Tenants page: each tenant of each queue (of ?queue=
// only), as `inspector tenants` shows it (inspect.Tenants): runs waiting
// and in flight, cap and weight from the console's config, whether it
// waits at its cap, its oldest waiting run.
func (c *Console) tenants(rw http.ResponseWriter, r *http.Request, s session) error {
	ctx, cancel := c.bounded(r, 2)
	defer cancel()
	queue := r.URL.Query().Get("queue")
	all, err := inspect.Tenants(ctx, c.Redis, c.Config, "")
	if err != nil {
		return err
	}
	now := c.opts.Now()
	queues := map[string]bool{}
	var rows []tenantRow
	capped, waiting := 0, int64(0)
	for _, t := range all {
		queues[t.Queue] = true
		if queue != "" && t.Queue != queue {
			continue
		}
		row := tenantRow{Tenant: t, Name: t.Tenant}
		if t.OldestWaiting != nil {
			row.WaitedMS = max(0, now.Sub(*t.OldestWaiting).Milliseconds())
		}
		if len(t.ByPrio) > 1 || t.ByPrio[broker.Normal] != t.Pending {
			var parts []string
			for _, p := range []string{broker.High, broker.Normal, broker.Low} {
				if n := t.ByPrio[p]; n > 0 {
					parts = append(parts, p+" "+strconv.FormatInt(n, 10))
				}
			}
			row.Prios = strings.Join(parts, ", ")
		}
		if t.Capped {
			capped++
		}
		waiting += t.Pending
		rows = append(rows, row)
	}
	names := make([]string, 0, len(queues))
	for q := range queues {
		names = append(names, q)
	}
	sort.Strings(names)
	c.render(rw, r, s, http.StatusOK, "tenants.html", "tenants", "Tenants", map[string]any{
		"Tenants": rows, "Queues": names, "Queue": queue, "Capped": capped, "Waiting": waiting,
	})
	return nil
}
