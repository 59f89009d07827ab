//go:build !race

package resilience

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
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

// familyFolds is how many groups of families leaveFamiliesOut holds out in
// turn: every family is in exactly one fold, so no record is scored by a
// model that saw its family (leave-one-family-out, grouped so that the
// figure costs ten trainings instead of one per family).
const familyFolds = 10

// leaveFamiliesOut trains the model without each fold of families in turn
// and classifies the fold's records with it: the model alone, the whole
// classifier (whose rules, unlike the model, were written having seen
// every family but the held-out rounds': that figure is an upper bound),
// and the whole classifier on the held-out rounds' records only (the
// honest figure: neither rules nor model saw their families).
func leaveFamiliesOut(corpus []corpusEntry, opt trainOptions) (model, whole, held tally, misses []string) {
	foldOf := map[string]int{}
	var families []string
	for _, e := range corpus {
		if f := familyOf(e); !slices.Contains(families, f) {
			families = append(families, f)
		}
	}
	sort.Strings(families)
	for i, f := range families {
		foldOf[f] = i % familyFolds
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2)
	for fold := range familyFolds {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			var train, test []corpusEntry
			for _, e := range corpus {
				if foldOf[familyOf(e)] == fold {
					test = append(test, e)
				} else {
					train = append(train, e)
				}
			}
			m := trainModel(train, opt)
			c := Classifier{Now: testClassifier.Now, model: m}
			mu.Lock()
			defer mu.Unlock()
			for _, e := range test {
				model.add(m.predict(e.text).Class, e.want, ByModel)
				v := c.Classify(&Failure{Status: e.status, Text: e.text})
				whole.add(v.Class, e.want, v.By)
				if heldOutFiles[e.file] {
					held.add(v.Class, e.want, v.By)
				}
				if v.Class != e.want {
					misses = append(misses, fmt.Sprintf("%s %s:%d want %s got %s by %s", familyOf(e), e.file, e.line, e.want, v.Class, v.By))
				}
			}
		}()
	}
	wg.Wait()
	sort.Strings(misses)
	return model, whole, held, misses
}

// TestClassifierGeneralization reports, as figures (no threshold), how the
// classifier does on families it has not met: leave-one-family-out over the
// corpus, and each corpus file as the shipped classifier sees it.
func TestClassifierGeneralization(t *testing.T) {
	corpus := modelCorpus(t)
	model, whole, held, misses := leaveFamiliesOut(corpus, defaultTrainOptions)
	t.Logf("classifier generalization: leave-one-family-out, model alone: %s", &model)
	t.Logf("classifier generalization: leave-one-family-out, whole classifier: %s", &whole)
	t.Logf("classifier generalization: leave-one-family-out, whole classifier, held-out rounds only (no rule written for them): %s", &held)
	raw, err := os.ReadFile("testdata/first_contact.tsv")
	require.NoError(t, err)
	for line := range strings.Lines(string(raw)) {
		f := strings.Split(strings.TrimSpace(line), "\t")
		if len(f) != 6 || strings.HasPrefix(f[0], "#") {
			continue
		}
		n, err1 := strconv.Atoi(f[2])
		exact, err2 := strconv.Atoi(f[3])
		same, err3 := strconv.Atoi(f[4])
		require.NoError(t, errors.Join(err1, err2, err3), line)
		t.Logf("classifier first contact: %s (%s): %d records, exact %.3f, same decision %.3f — %s",
			f[0], f[1], n, float64(exact)/float64(n), float64(same)/float64(n), f[5])
	}
	if testing.Verbose() {
		for _, m := range misses {
			t.Logf("  LOFO miss: %s", m)
		}
	}
}
