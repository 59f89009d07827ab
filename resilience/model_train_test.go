//go:build !race

// Training and evaluating the model is CPU work the race detector would
// slow tenfold; `make test` runs these tests in a separate step without it
// (make classifier-report).

package resilience

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// updateModel regenerates classifier_model.txt from the corpus:
// `make classifier-model` (go test ./resilience -run '^TestModelFileIsCurrent$' -update-model).
var updateModel = flag.Bool("update-model", false, "rewrite classifier_model.txt from the corpus")

// trainOptions are the model's training settings. They are part of the
// model: TestModelFileIsCurrent trains with defaultTrainOptions.
type trainOptions struct {
	Epochs  int     // passes over the corpus
	Rate    float64 // AdaGrad's learning rate
	L2      float64 // weight decay per update
	MinDF   int     // a feature must occur in this many training texts
	Balance float64 // 0: every text weighs 1; 1: every class weighs the same
	Seed    uint64  // the shuffle's seed: training is deterministic
}

var defaultTrainOptions = trainOptions{Epochs: 30, Rate: 0.3, L2: 1e-4, MinDF: 2, Balance: 0.5, Seed: 38}

// ruleDocs are the text table's phrases as training texts, each labelled
// with its rule's class: the contract's knowledge that the rules state
// compactly ("insufficient_quota" is quota_exhausted), which the model's
// word pieces can carry to wordings no rule names. Canceled is left out:
// the model never decides a cancellation.
func ruleDocs() []corpusEntry {
	var out []corpusEntry
	for _, r := range DefaultRules() {
		if r.Class == Canceled {
			continue
		}
		and := ""
		if len(r.And) > 0 {
			and = " " + r.And[0]
		}
		for _, p := range append(append([]string(nil), r.Any...), r.Codes...) {
			out = append(out, corpusEntry{text: p + and, want: r.Class, family: "rules/" + r.Name, file: "rules"})
		}
	}
	return out
}

// trainDoc is one training text: its features, the indexes of those the
// model keeps, and its class's index.
type trainDoc struct {
	feats []string
	index []int
	class int
}

// trainModel fits a multinomial logistic regression (AdaGrad, L2) to the
// corpus entries.
func trainModel(entries []corpusEntry, opt trainOptions) *textModel {
	entries = append(entries[:len(entries):len(entries)], ruleDocs()...)
	classes := Classes()
	classIndex := map[Class]int{}
	for i, c := range classes {
		classIndex[c] = i
	}
	docs := make([]trainDoc, 0, len(entries))
	df := map[string]int{}
	for _, e := range entries {
		d := trainDoc{feats: textFeatures(e.text), class: classIndex[e.want]}
		for _, f := range d.feats {
			df[f]++
		}
		docs = append(docs, d)
	}
	index := map[string]int{}
	var names []string
	for _, d := range docs {
		for _, f := range d.feats {
			if _, ok := index[f]; !ok && df[f] >= opt.MinDF {
				index[f] = len(names)
				names = append(names, f)
			}
		}
	}
	for i := range docs {
		for _, f := range docs[i].feats {
			if fi, ok := index[f]; ok {
				docs[i].index = append(docs[i].index, fi)
			}
		}
	}
	k := len(classes)
	w := make([]float64, len(names)*k)
	g := make([]float64, len(names)*k)
	bias, gb := make([]float64, k), make([]float64, k)
	rng := rand.New(rand.NewPCG(opt.Seed, opt.Seed))
	order := make([]int, len(docs))
	for i := range order {
		order[i] = i
	}
	// A class's texts weigh (mean count / its count)^Balance: the corpus
	// has eight times more invalid_request than canceled texts, and an
	// unseen family's rarer classes should not drown.
	counts := make([]float64, k)
	for _, d := range docs {
		counts[d.class]++
	}
	classWeight := make([]float64, k)
	for c := range k {
		if counts[c] > 0 {
			classWeight[c] = math.Pow(float64(len(docs))/float64(k)/counts[c], opt.Balance)
		}
	}
	scores := make([]float64, k)
	for range opt.Epochs {
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, di := range order {
			d := docs[di]
			x := 1 / math.Sqrt(float64(len(d.feats)))
			copy(scores, bias)
			for _, fi := range d.index {
				for c := range k {
					scores[c] += w[fi*k+c] * x
				}
			}
			softmax(scores)
			for c := range k {
				grad := scores[c]
				if c == d.class {
					grad--
				}
				grad *= classWeight[d.class]
				gb[c] += grad * grad
				bias[c] -= opt.Rate * grad / (math.Sqrt(gb[c]) + 1e-8)
				for _, fi := range d.index {
					j := fi*k + c
					gj := grad*x + opt.L2*w[j]
					g[j] += gj * gj
					w[j] -= opt.Rate * gj / (math.Sqrt(g[j]) + 1e-8)
				}
			}
		}
	}
	m := &textModel{classes: classes, bias: make([]float32, k), weights: map[string][]float32{}}
	m.setRules()
	for c := range k {
		m.bias[c] = round32(bias[c])
	}
	for fi, name := range names {
		row := make([]float32, k)
		nonzero := false
		for c := range k {
			row[c] = round32(w[fi*k+c])
			nonzero = nonzero || row[c] != 0
		}
		if nonzero {
			m.weights[name] = row
		}
	}
	return m
}

// round32 keeps three significant decimals (the file's precision) so that
// the model in memory equals the model read back from its file.
func round32(x float64) float32 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'g', 3, 32), 32)
	return float32(v)
}

func softmax(s []float64) {
	max := math.Inf(-1)
	for _, v := range s {
		max = math.Max(max, v)
	}
	sum := 0.0
	for i, v := range s {
		s[i] = math.Exp(v - max)
		sum += s[i]
	}
	for i := range s {
		s[i] /= sum
	}
}

// render writes the model in parseModel's format, features sorted.
func (m *textModel) render(header string) string {
	var b strings.Builder
	for line := range strings.Lines(header) {
		b.WriteString("# " + line)
	}
	b.WriteString("\n")
	row := func(key string, w []float32) {
		b.WriteString(key + "\t")
		for i, x := range w {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(strconv.FormatFloat(float64(x), 'g', 3, 32))
		}
		b.WriteByte('\n')
	}
	names := make([]string, 0, len(m.classes))
	for _, c := range m.classes {
		names = append(names, string(c))
	}
	b.WriteString("classes\t" + strings.Join(names, " ") + "\n")
	row("bias", m.bias)
	feats := make([]string, 0, len(m.weights))
	for f := range m.weights {
		feats = append(feats, f)
	}
	sort.Strings(feats)
	for _, f := range feats {
		row(f, m.weights[f])
	}
	return b.String()
}

// modelCorpus is every corpus record the model is trained on.
func modelCorpus(t *testing.T) []corpusEntry {
	var all []corpusEntry
	for _, path := range corpusFiles {
		all = append(all, loadRealErrors(t, path)...)
	}
	return all
}

const modelHeader = `agentq's classifier model: a multinomial logistic regression over the
features of resilience/model_features.go, trained on the corpus of
resilience/testdata and the phrases of the built-in text table. Generated by ` + "`make classifier-model`" + `; do not edit.
Each line: a feature, then its weight for each class (in the order of the
classes line).`

// TestModelFileIsCurrent: classifier_model.txt is what training on the
// corpus gives (run `make classifier-model` after changing the corpus, the
// features or the training).
func TestModelFileIsCurrent(t *testing.T) {
	corpus := modelCorpus(t)
	m := trainModel(corpus, defaultTrainOptions)
	want := m.render(modelHeader + fmt.Sprintf("\n%d records, %d features.", len(corpus), len(m.weights)))
	if *updateModel {
		require.NoError(t, os.WriteFile("classifier_model.txt", []byte(want), 0o644))
		return
	}
	require.True(t, want == modelFile, "classifier_model.txt is not what the corpus trains: run `make classifier-model`")
	parsed, err := parseModel(modelFile)
	require.NoError(t, err)
	require.Equal(t, m, parsed)
}
