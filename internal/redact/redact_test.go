package redact_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redact"
)

func TestURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"https://example.com/v1/chat", "https://example.com/v1/chat"},
		{"https://user:pass@example.com:8443/p", "https://example.com:8443/p"},
		{"https://user@example.com/p", "https://example.com/p"},
		{"https://generativelanguage.googleapis.com/v1/models:gen?key=SECRET&alt=sse", "https://generativelanguage.googleapis.com/v1/models:gen?[redacted]"},
		{"http://h/p#frag-secret", "http://h/p"},
		{"http://h/p?", "http://h/p?[redacted]"},
		{"redis://:pw@redis:6379/0", "redis://redis:6379/0"},
		{"mailto:secret@example.com", "mailto:[redacted]"},
		{"http://[::1]:80/a%2Fb?x=1", "http://[::1]:80/a%2Fb?[redacted]"},
		{"http://h/%zz?key=S", redact.Unparseable},
		{"", ""},
	} {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			got := redact.URL(tc.in)
			require.Equal(t, tc.want, got)
			for _, secret := range []string{"SECRET", "pass", "frag-secret", "pw@"} {
				require.NotContains(t, got, secret)
			}
		})
	}
}

func TestHost(t *testing.T) {
	t.Parallel()
	require.Equal(t, "hooks.slack.com", redact.Host("https://hooks.slack.com/services/T000/B000/XXXX"))
	require.Equal(t, "127.0.0.1:9", redact.Host("http://u:p@127.0.0.1:9/x?y=z"))
	require.Equal(t, redact.Unparseable, redact.Host("not a url"))
	require.Equal(t, redact.Unparseable, redact.Host("http://h/%zz"))
}

func TestErrorRedactsClientErrorKeepingTheChain(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens: connection refused
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost,
		"http://user:hunter2@"+addr+"/v1/gen?key=SECRET", strings.NewReader("{}"))
	require.NoError(t, err)
	_, cerr := http.DefaultClient.Do(req)
	require.Error(t, cerr)
	require.Contains(t, cerr.Error(), "SECRET", "precondition: the raw client error leaks the query")

	got := redact.Error(cerr)
	require.NotContains(t, got.Error(), "SECRET")
	require.NotContains(t, got.Error(), "hunter2")
	require.Contains(t, got.Error(), "http://"+addr+"/v1/gen?[redacted]")
	var ue *url.Error
	require.True(t, errors.As(got, &ue))
	var oe *net.OpError
	require.True(t, errors.As(got, &oe), "the chain below *url.Error is intact")
	require.Nil(t, redact.Error(nil))
	plain := errors.New("no url")
	require.Same(t, plain, redact.Error(plain))
}
