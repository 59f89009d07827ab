// Package webhook tells configured HTTP endpoints of task events, durably
// and at least once, by the Standard Webhooks specification
// (https://www.standardwebhooks.com): each delivery carries webhook-id
// (the same on every retry of it), webhook-timestamp and webhook-signature
// ("v1," and the base64 HMAC-SHA256 of "id.timestamp.body" under the
// webhook's whsec_ secret).
//
// # The outbox
//
// A task names the webhooks it notifies (its notify field, written when it
// is enqueued). Every event recorded for such a task after its creation is
// pushed, by the record script that records it (internal/record's
// rec_outbox), onto the task's outbox list (rkeys.TaskOutbox, in the
// task's slot), and the task is made due in the webhooks' due set
// (rkeys.WebhooksDue) in the same script; on a Redis Cluster, where the due
// set is in another slot, the record store adds it right after, and the
// Deliverer's repair finds any outbox that second step missed. A task that
// names no webhook costs nothing more.
//
// # Delivery
//
// Any worker runs a Deliverer. It claims due tasks with a lease
// (rkeys.WebhooksLeased: a claim past its lease goes back to due, so a
// worker killed mid-delivery loses nothing), moves the task's outbox
// entries into one delivery per (event, webhook) whose events include it
// (rkeys.TaskHooks), POSTs each due delivery, and reschedules the failures
// with an exponential, jittered backoff until the webhook's max_age, after
// which a delivery is given up and kept visible (rkeys.WebhooksGivenUp).
// A task's deliveries to a webhook are made in order of their events.
//
// A task is scored in the due set by the time of its event (or of its
// next retry), so due tasks are claimed in that order. The attempts go out
// from a pool (Options.Concurrency slots, each webhook at most its
// Hook.Concurrency of them): an attempt holds its slots, not the pass, so
// a receiver that hangs holds its own slots only; a task whose webhook has
// no free slot is handed back to the due set a little later.
package webhook
