package redact_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redact"
)

func TestSecretsEncodings(t *testing.T) {
	t.Parallel()
	const key = "sk-live/Abc+123=xyz&q<>"
	bearer := "Bearer " + key
	basicCred := base64.StdEncoding.EncodeToString([]byte("alice-admin:hunter2-pw"))
	jsonOf := func(s string) string { b, _ := json.Marshal(s); return string(b[1 : len(b)-1]) }
	s := redact.NewSecrets(key, bearer, "Basic "+basicCred)
	for _, tc := range []struct{ name, text string }{
		{"raw", "you sent " + key + "."},
		{"bearer", "you sent Authorization: " + bearer},
		{"base64", base64.StdEncoding.EncodeToString([]byte(key))},
		{"base64-raw", base64.RawStdEncoding.EncodeToString([]byte(key))},
		{"base64url", base64.URLEncoding.EncodeToString([]byte(key))},
		{"base64url-raw", base64.RawURLEncoding.EncodeToString([]byte(key))},
		{"base64-bearer", base64.StdEncoding.EncodeToString([]byte(bearer))},
		{"query", "?auth=" + url.QueryEscape(bearer)},
		{"query-key", "?key=" + url.QueryEscape(key)},
		{"path", "/k/" + url.PathEscape(key)},
		{"json", `{"sent":"` + jsonOf(bearer) + `"}`},
		{"basic", "Basic " + basicCred},
		{"basic-decoded", "user alice-admin with password hunter2-pw"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.True(t, s.Contains(tc.text), tc.text)
			got := s.String(tc.text)
			require.False(t, s.Contains(got), got)
			require.Contains(t, got, redact.Marker)
			require.NotContains(t, got, "Abc+123")
		})
	}
}

func TestSecretsLeaveOtherTextAlone(t *testing.T) {
	t.Parallel()
	// Values shorter than MinSecretLen are not secrets: "json" would
	// mangle every text that names it.
	require.Nil(t, redact.NewSecrets("json", "", "  abc  "))
	var none *redact.Secrets
	require.Equal(t, "a json text", none.String("a json text"))
	require.Equal(t, []byte(`{"a":1}`), none.JSON([]byte(`{"a":1}`)))
	err := errors.New("x")
	require.Same(t, err, none.Error(err))

	s := redact.NewSecrets("json", "Bearer tok-123456")
	require.Equal(t, "a json text", s.String("a json text"))
	require.Equal(t, "sent [REDACTED]", s.String("sent Bearer tok-123456"), "the longest form wins, once")
}

func TestSecretsJSONAndErrors(t *testing.T) {
	t.Parallel()
	s := redact.NewSecrets(`se"cret-42`)
	require.JSONEq(t, `{"echo":"[REDACTED]"}`, string(s.JSON([]byte(`{"echo":"se\"cret-42"}`))))
	// A replacement that breaks the document turns it into a JSON string.
	out := s.JSON([]byte(`{"a":"se"cret-42"}`))
	require.True(t, json.Valid(out), string(out))
	require.NotContains(t, string(out), "cret-42")

	inner := errors.New(`upstream said se"cret-42`)
	err := s.Error(inner)
	require.Equal(t, "upstream said [REDACTED]", err.Error())
	require.ErrorIs(t, err, inner, "the chain is kept")
}

func TestSecretsClipped(t *testing.T) {
	t.Parallel()
	const key = "sk-0123456789abcdef"
	s := redact.NewSecrets(key)
	// A body cut after the first bytes of the key, a stderr tail that
	// starts in its middle.
	require.Equal(t, "you sent [REDACTED]", s.Clipped("you sent "+key[:9]))
	require.Equal(t, "[REDACTED] was refused", s.Clipped(key[7:]+" was refused"))
	require.Equal(t, "ok sk-", s.Clipped("ok sk-"), "pieces under four bytes stay")
	require.False(t, strings.Contains(s.Clipped("x "+key+" y "+key[:12]), "0123"))
}
