package console

import (
	"net/http"
	"time"

	"github.com/agentq/agentq/internal/inspect"
)

// schedules is the Schedules page: per configured schedule, its cron and
// zone, agent, next and last fire, and the last fired task with its state
// (what `inspector schedules` shows).
func (c *Console) schedules(rw http.ResponseWriter, r *http.Request, s session) error {
	ctx, cancel := c.bounded(r, 1)
	defer cancel()
	list, err := inspect.Schedules(ctx, c.Redis, c.Config, time.Now())
	if err != nil {
		return err
	}
	c.render(rw, r, s, http.StatusOK, "schedules.html", "schedules", "Schedules", map[string]any{"Schedules": list})
	return nil
}
