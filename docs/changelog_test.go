package docs

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// versionRE is a released version's heading: "## [0.1.0] - 2026-11-28".
var versionRE = regexp.MustCompile(`^## \[(\d+)\.(\d+)\.(\d+)\] - (\d{4}-\d{2}-\d{2})$`)

// jargonRE matches words of the team's work log that mean nothing to a
// reader of the CHANGELOG ("round 6", "this stop").
var jargonRE = regexp.MustCompile(`(?i)\bround\s+(\d+|one|two|three|four|five|six)\b|\bthis stop\b`)

// changeKinds are Keep a Changelog's kinds of change, the only ### headings.
var changeKinds = []string{"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}

// changelogProblems lists what is wrong with the shape of a CHANGELOG
// (text): its title, then ## [Unreleased], then released versions, newest
// first, each with a date; ### headings only Keep a Changelog's kinds; no
// heading in work-log jargon.
func changelogProblems(text string) []string {
	var out []string
	bad := func(n int, why string) { out = append(out, "line "+strconv.Itoa(n)+": "+why) }
	var sections []string
	var last [3]int
	var lastDate time.Time
	released := false
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		if i == 0 && line != "# Changelog" {
			bad(n, "the title is not \"# Changelog\"")
		}
		if !strings.HasPrefix(line, "#") {
			continue
		}
		if jargonRE.MatchString(line) {
			bad(n, "a heading in work-log jargon: "+line)
		}
		switch {
		case strings.HasPrefix(line, "## "):
			sections = append(sections, line)
			if len(sections) == 1 {
				if line != "## [Unreleased]" {
					bad(n, "the first section is not ## [Unreleased]: "+line)
				}
				continue
			}
			m := versionRE.FindStringSubmatch(line)
			if m == nil {
				bad(n, "not a version with a date (## [X.Y.Z] - YYYY-MM-DD): "+line)
				continue
			}
			var v [3]int
			for k := range v {
				v[k], _ = strconv.Atoi(m[k+1])
			}
			date, err := time.Parse(time.DateOnly, m[4])
			if err != nil {
				bad(n, "not a date: "+m[4])
			}
			if released && (slices.Compare(v[:], last[:]) >= 0 || date.After(lastDate)) {
				bad(n, "versions are not newest first: "+line)
			}
			last, lastDate, released = v, date, true
		case strings.HasPrefix(line, "### "):
			if len(sections) == 0 {
				bad(n, "a ### heading before any version")
			} else if !slices.Contains(changeKinds, strings.TrimPrefix(line, "### ")) {
				bad(n, "a ### heading that is not a kind of change ("+strings.Join(changeKinds, ", ")+"): "+line)
			}
		}
	}
	if len(sections) < 2 {
		out = append(out, "no released version under ## [Unreleased]")
	}
	return out
}

// TestChangelogShape: CHANGELOG.md keeps Keep a Changelog's shape:
// [Unreleased] first, then versions with dates, newest first, changes by
// kind, and headings a user can read.
func TestChangelogShape(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../CHANGELOG.md")
	require.NoError(t, err)
	require.Empty(t, changelogProblems(string(b)))
}

// TestChangelogCheckerFindsProblems: the checker sees a missing
// [Unreleased], a version without a date, versions out of order, a kind
// that is not one and work-log headings.
func TestChangelogCheckerFindsProblems(t *testing.T) {
	t.Parallel()
	good := "# Changelog\n\n## [Unreleased]\n\n## [0.2.0] - 2027-01-02\n\n### Added\n\n#### Tasks\n\n- x\n\n## [0.1.0] - 2026-11-28\n\n### Fixed\n"
	require.Empty(t, changelogProblems(good))
	require.Equal(t, []string{"line 3: the first section is not ## [Unreleased]: ## [0.1.0] - 2026-11-28",
		"no released version under ## [Unreleased]"}, changelogProblems("# Changelog\n\n## [0.1.0] - 2026-11-28\n"))
	bad := "# Changelog\n\n## [Unreleased]\n\n## [0.1.0]\n\n### Fixed (this stop)\n\n" +
		"## [0.3.0] - 2027-01-02\n\n## [0.4.0] - 2027-01-01\n\n### Changed (classifier, round 6)\n"
	problems := changelogProblems(bad)
	require.Len(t, problems, 6, "%q", problems)
	joined := strings.Join(problems, "\n")
	for _, want := range []string{"line 5: not a version with a date", "work-log jargon: ### Fixed (this stop)",
		"not a kind of change", "line 11: versions are not newest first", "round 6"} {
		require.Contains(t, joined, want)
	}
}
