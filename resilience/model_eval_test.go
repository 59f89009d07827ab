//go:build !race

package resilience

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
)

// tally counts verdicts against their labels.
type tally struct {
	n, exact, same int
	by             map[Evidence]int
	byMiss         map[Evidence]int
}

func (t *tally) add(got, want Class, by Evidence) {
	if t.by == nil {
		t.by, t.byMiss = map[Evidence]int{}, map[Evidence]int{}
	}
	t.n++
	t.by[by]++
	if got == want {
		t.exact++
	} else {
		t.byMiss[by]++
	}
	if got.Valid() && DefaultPolicy().Rule(got) == DefaultPolicy().Rule(want) {
		t.same++
	}
}

func (t *tally) String() string {
	if t.n == 0 {
		return "no records"
	}
	s := fmt.Sprintf("%d records: exact %.3f, same decision %.3f", t.n,
		float64(t.exact)/float64(t.n), float64(t.same)/float64(t.n))
	if len(t.by) > 0 {
		var parts []string
		for _, e := range Evidences() {
			if t.by[e] > 0 {
				parts = append(parts, fmt.Sprintf("%s %d (%d wrong)", e, t.by[e], t.byMiss[e]))
			}
		}
		s += "; decided by " + strings.Join(parts, ", ")
	}
	return s
}

// familyOf is a record's family; a record without one counts as its own
// source repository's.
func familyOf(e corpusEntry) string {
	if e.family != "" {
		return e.family
	}
	src, _, _ := strings.Cut(e.source, "#")
	return "source/" + src
}

// leaveOneFamilyOut trains the model without each family in turn and
// classifies that family's records with it: the model alone, and the whole
// classifier (whose rules, unlike the model, were written having seen every
// family: that figure is an upper bound).
func leaveOneFamilyOut(corpus []corpusEntry, opt trainOptions) (model, whole tally, misses []string) {
	byFamily := map[string][]int{}
	var families []string
	for i, e := range corpus {
		f := familyOf(e)
		if _, ok := byFamily[f]; !ok {
			families = append(families, f)
		}
		byFamily[f] = append(byFamily[f], i)
	}
	sort.Strings(families)
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2)
	for _, fam := range families {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			held := map[int]bool{}
			for _, i := range byFamily[fam] {
				held[i] = true
			}
			train := make([]corpusEntry, 0, len(corpus))
			for i, e := range corpus {
				if !held[i] {
					train = append(train, e)
				}
			}
			m := trainModel(train, opt)
			c := Classifier{Now: testClassifier.Now, model: m}
			mu.Lock()
			defer mu.Unlock()
			for _, i := range byFamily[fam] {
				e := corpus[i]
				p := m.predict(e.text)
				model.add(p.Class, e.want, ByModel)
				v := c.Classify(&Failure{Status: e.status, Text: e.text})
				whole.add(v.Class, e.want, v.By)
				if v.Class != e.want {
					misses = append(misses, fmt.Sprintf("%s %s:%d want %s got %s by %s", fam, e.file, e.line, e.want, v.Class, v.By))
				}
			}
		}()
	}
	wg.Wait()
	sort.Strings(misses)
	return model, whole, misses
}

// TestClassifierGeneralization reports, as figures (no threshold), how the
// classifier does on families it has not met: leave-one-family-out over the
// corpus, and each corpus file as the shipped classifier sees it.
func TestClassifierGeneralization(t *testing.T) {
	corpus := modelCorpus(t)
	model, whole, misses := leaveOneFamilyOut(corpus, defaultTrainOptions)
	t.Logf("classifier generalization: leave-one-family-out, model alone: %s", &model)
	t.Logf("classifier generalization: leave-one-family-out, whole classifier: %s", &whole)
	if testing.Verbose() {
		for _, m := range misses {
			t.Logf("  LOFO miss: %s", m)
		}
	}
}
