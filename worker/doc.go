// Package worker runs agentq tasks: an asynq server whose one handler is
// agentq's pipeline, plus the worker's ops endpoints and metrics.
//
// # The pipeline
//
// Every delivery goes through the same few steps:
//
//  1. Decode the envelope. A payload that is not one is dead-lettered at
//     once (class invalid_request, reason invalid_payload), raw payload kept.
//  2. Resolve the agent. A name with no configured or registered runner is
//     dead-lettered (class not_supported, reason unknown_agent).
//  3. Ask the agent's shared circuit breaker (breaker.Breakers). An open
//     breaker defers the task until the breaker may admit a trial, with
//     jitter; a deferral uses no attempt.
//  4. Run the agent (exec, http or Go function) under the agent's timeout.
//     A redelivery's start is recorded (and fenced against superseded
//     runs) before the call; a first delivery's 50ms into the call, or
//     with its outcome in one write when the call ends sooner.
//  5. Classify the outcome (a resilience.Classifier with the config's
//     classifier.rules checked first; a timeout of the call is timeout,
//     the worker's own shutdown is canceled) and record it in the
//     breaker, the task history and the metrics.
//  6. Decide with the agent's decision table (resilience.Policy): succeed;
//     retry after a backoff (or the backend's Retry-After) as another
//     attempt of the same run; restart the task later as a fresh run
//     (package restart); or dead-letter it (package deadletter).
//
// Retries are asynq retries whose delay the pipeline chooses, and asynq's
// forwarder runs every worker.forward_interval (50ms by default), so a
// retry fires close to its computed time. Deferrals and cancellations are
// returned to asynq as non-failures: they use no attempt.
//
// # Running one
//
//	w, err := worker.New(cfg, rdb,
//		worker.WithAgent("summarize", agent.Func(summarize)),
//		worker.WithLogger(logger))
//	if err != nil { … }
//	err = w.Run(ctx) // until ctx ends, then a graceful shutdown
//
// Exec and http agents come from the config's agents block; Go functions
// are registered with WithAgent and take their settings from the block of
// the same name, or the defaults. New fails, naming the agent, when a
// configured agent has no runner.
//
// Run stops on ctx's end: it stops taking work, gives in-flight tasks up
// to worker.shutdown_timeout, puts the unfinished ones back on their queue
// without using an attempt, then cancels their agents (exec process groups
// are killed).
//
// # Ops endpoints
//
// When worker.http_addr is set (or WithListener is given) the worker serves
// GET /healthz (the process is up), GET /readyz (Redis answers a PING; 503
// otherwise), GET /metrics (Prometheus, each Worker has its own registry)
// and GET /api/v1/agents (each agent's breaker and health; requires
// "Authorization: Bearer <token>" when AGENTQ_API_TOKEN or WithAPIToken
// sets one). OpsHandler returns the same handler for embedding.
//
// # Alerts
//
// A worker that sees alerts.threshold failures of one agent within
// alerts.window logs an ERROR line with alert=true, counts
// agentq_alerts_total and, when alerts.webhook_url is set, POSTs a JSON
// summary to it from a background goroutine. Failures are counted in Redis
// for the whole fleet, once per window for the fleet (per process while
// Redis cannot count); a failed POST logs the webhook's host only.
package worker
