package console

import (
	"net/http"

	"github.com/agentq/agentq/internal/webhook"
)

// webhooks is the Webhooks page: per configured webhook, its pending,
// failing and given-up deliveries, last error and next try (what
// `inspector webhooks` shows); failing endpoints first.
func (c *Console) webhooks(rw http.ResponseWriter, r *http.Request, s session) error {
	ctx, cancel := c.bounded(r, 1)
	defer cancel()
	hooks := map[string]webhook.Hook{}
	for _, n := range c.Config.WebhookNames() {
		w, _ := c.Config.Webhook(n)
		hooks[n] = webhook.Hook{Name: n, URL: w.URL}
	}
	list, err := webhook.Statuses(ctx, c.Redis, hooks)
	if err != nil {
		return err
	}
	var failing, others []webhook.Status
	for _, st := range list {
		if st.FailingNow() || st.Failing > 0 || st.GivenUp > 0 {
			failing = append(failing, st)
		} else {
			others = append(others, st)
		}
	}
	c.render(rw, r, s, http.StatusOK, "webhooks.html", "webhooks", "Webhooks",
		map[string]any{"Webhooks": append(failing, others...), "Failing": len(failing)})
	return nil
}
