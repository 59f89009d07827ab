package delivery

import (
	"cmp"
	"encoding/json"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/tracing"
	"github.com/agentq/agentq/internal/usage"
	"github.com/agentq/agentq/resilience"
	"github.com/agentq/agentq/tasks"
)

// meter turns the calls' usage into cost (the config's pricing), metrics
// (agentq_tokens_total, agentq_cost_usd_total) and the usage sink's
// entries (one usage.Entry per call that reported usage, priced).
type meter struct {
	prices usage.Prices
	m      *Metrics // tokens, cost, and the tenant labels (metrics.tenant)
}

func newMeter(cfg *config.Config, m *Metrics) *meter { return &meter{prices: cfg.Prices(), m: m} }

// read returns what the call used, priced, and the system its reply's
// shape names: the ActionResponse's usage (reply.Usage) or the result's
// (data: a provider's reply or an assembled stream), else a failed HTTP
// reply's body (f.Text) when it reports usage. The model is the reply's,
// else the one the task's params name (Bedrock's replies name none).
func (mt *meter) read(params, data json.RawMessage, runErr error, reply agent.Reply) (usage.Usage, string) {
	u, system := agent.UsageOf(data, reply.Usage)
	var f *resilience.Failure
	if u.IsZero() && errors.As(runErr, &f) && f.Text != "" {
		u, system = usage.Parse([]byte(f.Text))
	}
	if u.IsZero() {
		return usage.Usage{}, ""
	}
	if u.Model == "" {
		u.Model = usage.ModelOf(params)
	}
	return mt.prices.Price(u), system
}

// model is the model label of u: the priced model's name, else
// usage.Other (the labels stay bounded whatever the replies say).
func (mt *meter) model(u usage.Usage) string {
	if name, _, ok := mt.prices.Match(u.Model); ok {
		return name
	}
	return usage.Other
}

// used counts a call's usage u (served by agent, for env's tenant) in the
// metrics and hands it to sink (the worker's: WithUsageSink, by default
// the fleet's totals; nil: none); nothing for a call without usage.
func (mt *meter) used(env *tasks.Envelope, agentLabel string, u usage.Usage, at time.Time, sink usage.Sink) {
	if u.IsZero() {
		return
	}
	tenant, model := mt.m.tenant(env.Tenant), mt.model(u)
	for _, k := range []struct {
		kind string
		n    int64
	}{{"input", u.InputTokens}, {"output", u.OutputTokens}, {"cached", u.CachedTokens}} {
		if k.n > 0 {
			mt.m.tokens.WithLabelValues(agentLabel, tenant, model, k.kind).Add(float64(k.n))
		}
	}
	if u.Priced {
		mt.m.cost.WithLabelValues(agentLabel, tenant, model).Add(u.CostUSD)
	}
	if sink != nil {
		sink.Add(usage.Entry{Agent: agentLabel, Tenant: env.Tenant, At: at, Usage: u})
	}
}

// usageSeries adds the usage counters to m.
func (m *Metrics) usageSeries() {
	m.tokens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentq_tokens_total",
		Help: "Tokens the agents' calls reported, by agent, tenant (named tenants of the config, default, the rest other), model (priced models, the rest other) and kind (input, output, cached: cached is a part of input).",
	}, []string{"agent", "tenant", "model", "kind"})
	m.cost = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentq_cost_usd_total",
		Help: "Cost in USD of the tokens the agents' calls reported, by the config's pricing; by agent, tenant and model (as agentq_tokens_total).",
	}, []string{"agent", "tenant", "model"})
	m.reg.MustRegister(m.tokens, m.cost)
}

// spanUsage sets the OpenTelemetry GenAI semantic-convention attributes of
// the call c that ended an attempt of env on its span: the tokens, the
// model the task's params asked for (gen_ai.request.model; the reply's
// when they name none) and the one the reply named (gen_ai.response.model),
// the provider when the reply's shape tells (gen_ai.system), and the cost
// when the model is priced (agentq.usage.cost_usd).
func spanUsage(span trace.Span, env *tasks.Envelope, c callResult) {
	u := c.usage
	if u.IsZero() {
		return
	}
	span.SetAttributes(attribute.Int64(tracing.AttrGenAIInputTokens, u.InputTokens),
		attribute.Int64(tracing.AttrGenAIOutputTokens, u.OutputTokens))
	if req := cmp.Or(usage.ModelOf(env.Params), u.Model); req != "" {
		span.SetAttributes(attribute.String(tracing.AttrGenAIRequestModel, req))
	}
	if u.Model != "" {
		span.SetAttributes(attribute.String(tracing.AttrGenAIResponseModel, u.Model))
	}
	if c.system != "" {
		span.SetAttributes(attribute.String(tracing.AttrGenAISystem, c.system))
	}
	if u.Priced {
		span.SetAttributes(attribute.Float64(tracing.AttrCostUSD, u.CostUSD))
	}
}
