package console

import (
	"net/http"

	"github.com/agentq/agentq/internal/inspect"
)

// workerTask is a row of the Workers page's task table: a task in flight
// and its worker.
type workerTask struct {
	inspect.WorkerTask
	Worker string
	Gone   bool
}

// workers is the Workers page: every worker process of the registry
// (inspect.Workers, what `inspector workers` shows), alive or gone, and
// the tasks in flight on them; a gone worker's orphaned tasks say when
// asynq's lease recovery brings them back.
func (c *Console) workers(rw http.ResponseWriter, r *http.Request, s session) error {
	ctx, cancel := c.bounded(r, 1)
	defer cancel()
	list, err := inspect.Workers(ctx, c.Redis, c.opts.Now())
	if err != nil {
		return err
	}
	var rows []workerTask
	alive, orphaned := 0, 0
	for _, w := range list {
		if w.State == inspect.WorkerAlive {
			alive++
		}
		orphaned += w.Orphaned
		for _, t := range w.Tasks {
			rows = append(rows, workerTask{WorkerTask: t, Worker: w.ID, Gone: w.State == inspect.WorkerGone})
		}
	}
	c.render(rw, r, s, http.StatusOK, "workers.html", "workers", "Workers", map[string]any{
		"Workers": list, "Alive": alive, "Gone": len(list) - alive, "Tasks": rows, "Orphaned": orphaned,
		"GoneAfter": inspect.GoneAfter.String(), "Interval": inspect.HeartbeatInterval.String(),
	})
	return nil
}
