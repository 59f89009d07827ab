package agent

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestUsageTokens(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name        string
		data, usage string
		want        int64
	}{
		{"ActionResponse usage number", `{}`, `812`, 812},
		{"ActionResponse usage total", `{}`, `{"total_tokens":90,"input_tokens":1}`, 90},
		{"ActionResponse usage in+out", `null`, `{"input_tokens":40,"output_tokens":2}`, 42},
		{"OpenAI reply data", `{"id":"x","usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`, ``, 15},
		{"Anthropic reply data", `{"usage":{"input_tokens":7,"output_tokens":3}}`, ``, 10},
		{"prompt+completion only", `{"usage":{"prompt_tokens":7,"completion_tokens":3}}`, ``, 10},
		{"usage field wins over data", `{"usage":{"total_tokens":1}}`, `5`, 5},
		{"none", `{"ok":true}`, ``, 0},
		{"not an object", `"text"`, ``, 0},
		{"garbage usage", `{"usage":"lots"}`, `[1]`, 0},
		{"negative", `{}`, `-4`, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var usage json.RawMessage
			if tc.usage != "" {
				usage = json.RawMessage(tc.usage)
			}
			require.Equal(t, tc.want, UsageTokens(json.RawMessage(tc.data), usage))
		})
	}
}

// TestHTTPReportsReply: the HTTP runner reports every reply's status and
// headers to the context's observer, success or not.
func TestHTTPReportsReply(t *testing.T) {
	t.Parallel()
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Ratelimit-Remaining-Requests", "0")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"usage":{"total_tokens":3}}`))
	}))
	t.Cleanup(srv.Close)
	h, err := NewHTTP(HTTPConfig{URL: srv.URL})
	require.NoError(t, err)
	for _, st := range []int{http.StatusOK, http.StatusTooManyRequests} {
		status = st
		var got []Reply
		ctx := WithReplyObserver(context.Background(), func(r Reply) { got = append(got, r) })
		_, _ = h.Run(ctx, Request{TaskID: "t", Agent: "a", Params: json.RawMessage(`{}`)})
		require.Len(t, got, 1)
		require.Equal(t, st, got[0].Status)
		require.Equal(t, "0", got[0].Header.Get("x-ratelimit-remaining-requests"))
	}
	_, err = h.Run(context.Background(), Request{TaskID: "t", Agent: "a", Params: json.RawMessage(`{}`)})
	require.Error(t, err, "no observer: nothing breaks (a 429 is still an error)")
}
