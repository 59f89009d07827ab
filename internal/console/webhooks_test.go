package console

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/rkeys"
)

// TestWebhooksPage: the Webhooks page lists the configured webhooks, a
// failing endpoint first with its last error, URLs redacted.
func TestWebhooksPage(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	f.cfg.Webhooks = map[string]config.Webhook{
		"billing": {URL: "https://billing.example/hook?token=s3cret", Secret: "${B}"},
		"audit":   {URL: "https://audit.example/hook", Secret: "${A}"},
	}
	require.NoError(t, f.rdb.HSet(context.Background(), rkeys.WebhooksStatus(),
		"billing:error", `{"at":1764057600000,"error":"https://billing.example/hook?[redacted] answered HTTP 500"}`).Err())
	r := call(t, "GET", f.url+"/ui/webhooks", nil, "Authorization: Bearer "+testToken)
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Contains(t, r.body, `id="webhooks"`)
	require.Contains(t, r.body, "1 failing endpoint.")
	require.Regexp(t, `(?s)data-name="billing" class="failing".*data-name="audit"`, r.body, "the failing endpoint first")
	require.Contains(t, r.body, "answered HTTP 500")
	require.NotContains(t, r.body, "s3cret")
}
