package api

import (
	"net/http"
	"time"

	"github.com/agentq/agentq/internal/usage"
)

// defaultUsageSince is the window of GET /api/v1/usage without since.
const defaultUsageSince = 24 * time.Hour

// usageTotals serves GET /api/v1/usage?by=&since=: the fleet's usage
// totals (usage.Summarize) over the hours from since ago to now, by agent
// (the default), tenant or model, and per hour.
func (s *Server) usageTotals(rw http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	by := q.Get("by")
	if err := usage.ValidBy(by); err != nil {
		return invalid("by: must be agent, tenant or model, not %q", by)
	}
	since := defaultUsageSince
	if v := q.Get("since"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return invalid("since: must be a positive duration such as 24h, not %q", v)
		}
		since = d
	}
	ctx, cancel := s.bounded(r, 1)
	defer cancel()
	rep, err := usage.Summarize(ctx, s.Redis, by, since, s.opts.Now())
	if err != nil {
		return err
	}
	writeJSON(rw, http.StatusOK, rep)
	return nil
}
