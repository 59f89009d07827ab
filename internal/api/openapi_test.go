package api

import (
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// TestOpenAPIMatchesRoutes: every operation api/openapi.yaml documents is a
// route of the table the mux is built from, and every route is documented,
// with the same authentication.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	var doc struct {
		OpenAPI  string                    `yaml:"openapi"`
		Security []map[string][]string     `yaml:"security"`
		Paths    map[string]map[string]any `yaml:"paths"`
	}
	require.NoError(t, yaml.Unmarshal(openAPIDoc, &doc))
	require.True(t, strings.HasPrefix(doc.OpenAPI, "3."), doc.OpenAPI)
	require.NotEmpty(t, doc.Security, "bearer auth is the default")

	methods := map[string]bool{"get": true, "put": true, "post": true, "delete": true, "options": true, "head": true, "patch": true, "trace": true}
	documented := map[string]bool{} // "METHOD path" → auth
	for path, item := range doc.Paths {
		for k, op := range item {
			if !methods[k] {
				continue
			}
			auth := true
			if m, ok := op.(map[string]any); ok {
				if sec, ok := m["security"]; ok {
					list, _ := sec.([]any)
					auth = len(list) > 0
				}
				require.NotEmpty(t, m["responses"], "%s %s has responses", k, path)
			}
			documented[strings.ToUpper(k)+" "+path] = auth
		}
	}
	real := map[string]bool{}
	for _, r := range Routes() {
		real[r.Method+" "+r.Path] = r.Auth
	}
	require.Equal(t, sortedKeys(real), sortedKeys(documented), "documented operations == routes")
	for k, auth := range real {
		require.Equal(t, auth, documented[k], "%s: authentication documented as in the route table", k)
	}
}

// TestRoutesAreServed: every route of the table reaches its handler through
// the mux (not the catch-all 404 or a 405).
func TestRoutesAreServed(t *testing.T) {
	t.Parallel()
	s := New(nil, nil, Options{Token: "tok"})
	h := s.Handler()
	for _, r := range Routes() {
		path := strings.ReplaceAll(r.Path, "{id}", "some-id")
		req := httptest.NewRequest(r.Method, path, nil)
		rec := httptest.NewRecorder()
		if r.Auth {
			// Without the token a routed request stops at the auth check.
			h.ServeHTTP(rec, req)
			require.Equal(t, http.StatusUnauthorized, rec.Code, "%s %s", r.Method, r.Path)
			continue
		}
		if r.Path == "/healthz" {
			continue // needs Redis; covered by the handler tests
		}
		h.ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.Code, "%s %s", r.Method, r.Path)
	}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestRoutesHaveSummaries: every route carries its OpenAPI summary (what
// `enqueuer serve --help` lists for it).
func TestRoutesHaveSummaries(t *testing.T) {
	t.Parallel()
	for _, r := range Routes() {
		require.NotEmpty(t, r.Summary, "%s %s: a summary in api/openapi.yaml", r.Method, r.Path)
		require.NotContains(t, r.Summary, "\n", "%s %s: a one-line summary", r.Method, r.Path)
	}
}
