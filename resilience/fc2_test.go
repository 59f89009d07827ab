package resilience

import "testing"

func TestFirstContactModel(t *testing.T) {
	m := builtinModel()
	type b struct{ n, ok, dok int }
	buckets := map[int]*b{}
	all, allok := 0, 0
	for _, p := range []string{"testdata/real_errors_round7_providers.txt", "testdata/real_errors_round7_tools.txt"} {
		for _, e := range loadRealErrors(t, p) {
			pr := m.predict(e.text)
			all++
			if pr.Class == e.want { allok++ }
			_, mt := testClassifier.Explain(&Failure{Status: e.status, Text: e.text})
			if mt.By != ByDefault && mt.By != ByModel { continue }
			k := int(pr.Prob * 10)
			if buckets[k] == nil { buckets[k] = &b{} }
			buckets[k].n++
			if pr.Class == e.want { buckets[k].ok++ }
			if e.want == ProviderError { buckets[k].dok++ }
		}
	}
	t.Logf("model alone on round 7: %d/%d %.3f", allok, all, float64(allok)/float64(all))
	for k := 0; k <= 10; k++ { if x := buckets[k]; x != nil { t.Logf("prob %.1f: n=%d model right %d, provider_error right %d", float64(k)/10, x.n, x.ok, x.dok) } }
}
