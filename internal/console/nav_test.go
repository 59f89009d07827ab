package console

import (
	"net/http"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// navLinkRE matches a link of layout.html's navigation bar: its path under
// Base and its text.
var navLinkRE = regexp.MustCompile(`<a href="\{\{\.Base\}\}([a-z/]*)"[^>]*>([^<]+)</a>`)

// TestNavPages: Pages() is the navigation bar of templates/layout.html,
// link for link in its order (`enqueuer serve --help` lists Pages(), so a
// page added to the bar without it fails here), and every page is served.
func TestNavPages(t *testing.T) {
	t.Parallel()
	layout, err := templateFS.ReadFile("templates/layout.html")
	require.NoError(t, err)
	nav := regexp.MustCompile(`(?s)<nav aria-label="Main">(.*?)</nav>`).FindSubmatch(layout)
	require.NotNil(t, nav, "layout.html has its main nav")
	var inLayout []Page
	for _, m := range navLinkRE.FindAllSubmatch(nav[1], -1) {
		inLayout = append(inLayout, Page{Name: string(m[2]), Path: string(m[1])})
	}
	var listed []Page
	for _, p := range Pages() {
		require.NotEmpty(t, p.About, "page %s says what it shows", p.Name)
		listed = append(listed, Page{Name: p.Name, Path: p.Path})
	}
	require.Equal(t, inLayout, listed, "console.Pages() == layout.html's nav")

	f := newFixture(t, testToken)
	for _, p := range Pages() {
		r := call(t, "GET", f.url+Base+p.Path, nil, "Authorization: Bearer "+testToken)
		require.Equal(t, http.StatusOK, r.status, "page %s (%s%s)", p.Name, Base, p.Path)
	}
}
