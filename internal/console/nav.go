package console

import "slices"

// Page is one page of the console's navigation bar.
type Page struct {
	// Name is its link's text ("Dead letters").
	Name string
	// Path is its path under Base ("deadletters"; "" for the overview).
	Path string
	// About says what it shows, for `enqueuer serve --help`.
	About string
}

// navPages are the navigation bar's pages, in its order. TestNavPages holds
// templates/layout.html's links and the routes to this list.
var navPages = []Page{
	{"Overview", "", "queue sizes, dead letters, restarts and breakers at a glance"},
	{"Tasks", "tasks", "waiting and running tasks, filtered; the search box finds one by ID or correlation ID"},
	{"Dead letters", "deadletters", "requeue, delete, bulk actions, export"},
	{"Breakers", "breakers", "every circuit breaker's state; reset and trip"},
	{"Restarts", "restarts", "tasks waiting for a restart, soonest first"},
	{"Agents", "agents", "the configured agents with their circuit breaker"},
	{"Webhooks", "webhooks", "pending, failing and given-up deliveries of each webhook"},
	{"Workers", "workers", "worker processes, alive or gone, and their tasks in flight"},
	{"Tenants", "tenants", "pending, in flight, cap and weight of each queue's tenants"},
	{"Schedules", "schedules", "next and last fire of each configured schedule, its last task"},
	{"Usage", "usage", "the fleet's token usage and cost over a window, by agent, tenant or model"},
	{"Budgets", "budgets", "what the agents' and tenants' budgets have used and left"},
}

// Pages returns the console's pages: the navigation bar's, in its order.
func Pages() []Page { return slices.Clone(navPages) }
