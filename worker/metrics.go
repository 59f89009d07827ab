package worker

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/buildinfo"
	"github.com/agentq/agentq/internal/delivery"
)

// UnknownAgentLabel is the agent label of every series about a task whose
// agent this worker does not run (see delivery.UnknownAgentLabel).
const UnknownAgentLabel = delivery.UnknownAgentLabel

// metrics are the worker's Prometheus series: the delivery's
// (delivery.Metrics) and its background components'. Each Worker has its
// own registry, so several workers can live in one process (tests,
// embedding).
type metrics struct {
	reg           *prometheus.Registry
	delivery      *delivery.Metrics
	alerts        *prometheus.CounterVec
	probes        *prometheus.CounterVec
	probeDuration *prometheus.HistogramVec
	// shortReplication counts writes that reached fewer replicas than
	// redis.wait_replicas within redis.wait_timeout.
	shortReplication prometheus.Counter
	// idleWaits counts the idle waits of the worker's dequeue by how they
	// ended (internal/broker.Cause: token, bound, stopped, error).
	idleWaits *prometheus.CounterVec
	// fleet are the fleet's gauges, exported while this worker holds
	// their lease (gauges.go).
	fleet *fleetGauges
}

// agent is the agent label of name (delivery.Metrics.Agent).
func (m *metrics) agent(name string) string { return m.delivery.Agent(name) }

// newMetrics registers the worker's series; agents are the agents it
// runs, tenants the configured ones.
func newMetrics(agents []string, tenants broker.FairConfig) *metrics {
	reg := prometheus.NewRegistry()
	d := delivery.NewMetrics(reg, agents, tenants)
	m := &metrics{
		reg: reg, delivery: d,
		alerts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentq_alerts_total", Help: "Failure-rate alerts raised.",
		}, []string{"agent"}),
		probes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentq_probe_total", Help: "Health probes run by this worker, by agent and result (ok, fail).",
		}, []string{"agent", "result"}),
		probeDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "agentq_probe_duration_seconds", Help: "Duration of health probes.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"agent"}),
		shortReplication: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "agentq_replication_short_total",
			Help: "Writes of this worker that reached fewer replicas than redis.wait_replicas within redis.wait_timeout.",
		}),
		idleWaits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentq_idle_waits_total",
			Help: "Waits of an idle worker for work, by how they ended: token (woken by an enqueue, forward or restart), bound (worker.poll_interval passed), stopped, error.",
		}, []string{"end"}),
		fleet: newFleetGauges(),
	}
	reg.MustRegister(m.fleet, m.shortReplication, m.idleWaits, m.alerts, m.probes, m.probeDuration, buildinfo.Collector(),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// truncate is the delivery's (the probes use it).
var truncate = delivery.Truncate
