package resilience

import "testing"

func TestFirstContactRound7(t *testing.T) {
	for _, p := range []string{"testdata/real_errors_round7_providers.txt", "testdata/real_errors_round7_tools.txt"} {
		exact, same, n := 0, 0, 0
		dflt := 0
		for _, e := range loadRealErrors(t, p) {
			v, m := testClassifier.Explain(&Failure{Status: e.status, Text: e.text})
			n++
			if v.Class == e.want {
				exact++
			}
			if v.Class.Valid() && DefaultPolicy().Rule(v.Class) == DefaultPolicy().Rule(e.want) {
				same++
			}
			if m.By == ByDefault {
				dflt++
				if v.Class != e.want { t.Logf("DEFAULT MISS %s:%d want %s", p, e.line, e.want) }
			} else if v.Class != e.want {
				t.Logf("MISS %s:%d want %s got %s by %s %s", p, e.line, e.want, v.Class, m.By, m.Name)
			}
		}
		t.Logf("FIRST CONTACT %s: %d records exact %d (%.3f) same %d (%.3f); default %d", p, n, exact, float64(exact)/float64(n), same, float64(same)/float64(n), dflt)
	}
}
