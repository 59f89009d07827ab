package console

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/broker/brokertest"
)

// seedTenants sets up brokertest's scene on queue default (acme at its cap
// of 2, beta's low runs, the default tenant's) and tenant zed's run on
// queue other; it returns what each tenant of default has.
func (f *fixture) seedTenants(t *testing.T) map[string]brokertest.Want {
	t.Helper()
	want := brokertest.Seed(t, f.rdb, "default")
	brokertest.Enqueue(t, f.rdb, "other", broker.Lane{Tenant: "zed"}, "zed", 1, time.Now())
	return want
}

func n(v int64) string { return strconv.FormatInt(v, 10) }

// TestTenantsPage: the Tenants page lists each tenant of each queue with
// its runs waiting (by priority when not all normal) and in flight, its
// cap and weight from the config, acme at its cap and its oldest run
// waiting an hour; ?queue= keeps one queue; the navigation links to it
// and the Overview counts the lanes' runs as pending.
func TestTenantsPage(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	want := f.seedTenants(t)
	auth := "Authorization: Bearer " + testToken
	r := call(t, "GET", f.url+"/ui/tenants", nil, auth)
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Contains(t, r.body, `<a href="/ui/tenants" aria-current="page">Tenants</a>`)
	require.Contains(t, r.body, `<span id="tenants-count">5</span> tenant rows`)
	require.Contains(t, r.body, "1 at their cap</strong>")
	require.Regexp(t, `(?s)data-queue="default" data-tenant="".*data-tenant="acme".*data-tenant="beta".*data-queue="other" data-tenant="".*data-tenant="zed"`, r.body)
	require.Regexp(t, `data-tenant=""><td>default</td><td class="tenant"><em>\(default\)</em></td><td class="n pending">`+n(want[""].Pending)+
		`</td><td class="n inflight">`+n(want[""].InFlight)+`</td><td class="n cap">none</td><td class="n">1</td>`, r.body)
	require.Regexp(t, `data-tenant="acme" class="failing"><td>default</td><td class="tenant"><code>acme</code></td><td class="n pending">`+n(want["acme"].Pending)+
		`</td><td class="n inflight">2</td><td class="n cap">2</td><td class="n">3</td><td class="capped"><span class="badge st-open">at cap</span></td><td class="oldest">(59m5\ds|1h0m\d+s) <span class="note">\(since \d{4}-`, r.body)
	require.Regexp(t, `data-tenant="beta"><td>default</td><td class="tenant"><code>beta</code></td><td class="n pending">`+n(want["beta"].Pending)+
		` <span class="note">\(low \d\)</span></td><td class="n inflight">`+n(want["beta"].InFlight)+`</td>`, r.body)

	r = call(t, "GET", f.url+"/ui/tenants?queue=other", nil, auth)
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Contains(t, r.body, `<span id="tenants-count">2</span> tenant rows`)
	require.NotContains(t, r.body, `data-tenant="acme"`)
	require.Contains(t, r.body, `<option value="other" selected>other</option>`)

	r = call(t, "GET", f.url+"/ui/", nil, auth)
	require.Equal(t, http.StatusOK, r.status, r.body)
	pending := want[""].Pending + want["acme"].Pending + want["beta"].Pending
	require.Regexp(t, `<tr data-queue="default">.*?<td class="n" data-label="Pending"><a [^>]*>`+n(pending)+
		`</a></td><td class="n" data-label="Tenants"><a href="/ui/tenants\?queue=default">3</a></td>`, r.body,
		"the Overview's pending counts the runs in lanes")
}
