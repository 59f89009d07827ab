// Package wakeup lets idle workers wait for work instead of polling Redis
// for it, while asynq stays the transport.
//
// Every write that makes a task pending also pushes a token onto its
// queue's wake list (rkeys.Wake, in the queue's slot; capped at Cap): the
// enqueue scripts of package tasks, and the worker's forward of scheduled
// and retry tasks. An idle worker blocks on the wake lists of its queues
// (Waiter: BLPOP, at most the poll interval), so one token wakes one
// worker. Producers announce tasks scheduled for later on rkeys.DueChannel,
// so that workers forward them when due (Dues) without polling the
// scheduled sets. AsynqClient fits both into an asynq server, which makes
// all its Redis calls through the client it is given.
//
// The bound: a task whose token is lost waits at most the poll interval
// (worker.poll_interval) before an idle worker finds it, plus, for a
// delayed task, the forwarder's tick (worker.forward_interval).
package wakeup
