// Package api is agentq's HTTP API, served by `enqueuer serve`: other
// services enqueue tasks, read a task's state and history, see the agents'
// health and page or requeue dead letters over HTTP with JSON bodies.
//
// Routes (the table in routes.go is the single source: the mux is built from
// it and a test checks it against the OpenAPI document, api/openapi.yaml,
// which is embedded and served at GET /api/v1/openapi.yaml):
//
//	POST /api/v1/tasks                       enqueue one task or a batch {"tasks":[…]}
//	GET  /api/v1/tasks/{id}                  the task's state and history
//	GET  /api/v1/agents                      configured agents with their breaker
//	GET  /api/v1/deadletters                 a page of dead letters (limit, offset, agent, class)
//	POST /api/v1/deadletters/{id}/requeue    requeue one dead letter with a fresh budget
//	GET  /api/v1/openapi.yaml                the OpenAPI 3 document
//	GET  /healthz                            liveness and Redis reachability (no auth)
//	GET  /metrics                            Prometheus metrics of the process (no auth; metrics.go)
//
// # Authentication
//
// When Options.Token is set (enqueuer serve reads AGENTQ_API_TOKEN), every
// route but /healthz, /metrics and the OpenAPI document requires
// "Authorization: Bearer <token>", compared in
// constant time; otherwise 401 unauthorized. Wrong tokens are counted per
// client address (the TCP peer; X-Forwarded-For is not trusted) and
// logged: after 10 within a minute the address gets 429 too_many_requests,
// with Retry-After, before its token is compared (httpx.Limiter).
//
// # Browser protections (guard.go)
//
// A write whose Content-Type is not application/json is 415
// unsupported_media_type (a cross-site text/plain form POST); a request
// whose Origin is not the API's own is 403 forbidden; on a loopback address
// (Serve's listener, or Options.Addr for Handler) a Host that is not a
// loopback name or address is 403 forbidden (DNS rebinding).
//
// # Errors
//
// Every error is a JSON object {"code": "…", "error": "…"} whose code is one
// of the stable Code… constants: invalid_request (400), invalid_signal (400), unauthorized (401),
// forbidden (403), not_found (404), method_not_allowed (405),
// agent_unavailable (409), task_ended (409), signal_cap (409), request_too_large (413), unsupported_media_type
// (415), too_many_requests (429), internal (500), unavailable (503: Redis cannot answer). A Redis that is down gives 503 within Options.RedisTimeout; a
// request never hangs on it.
//
// # Idempotency
//
// A task ID chosen by the caller is an idempotency key: enqueueing it again
// enqueues nothing and answers 200 with the existing task, where a new task
// answers 202 Accepted.
//
// # Fail-fast enqueue
//
// A task with "fail_if_unavailable": true is refused (409 agent_unavailable,
// with open_until and a Retry-After header) while its agent's circuit
// breaker is open. CheckAvailable is the same check for other callers (the
// enqueuer CLI uses it for --fail-if-unavailable).
package api
