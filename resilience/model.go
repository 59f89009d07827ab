package resilience

import (
	_ "embed"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
)

// The learned model decides the texts that neither structure nor the text
// table decide: a multinomial logistic regression over textFeatures,
// trained on the sourced corpus (resilience/testdata) and kept as the data
// file classifier_model.txt, which `make classifier-model` regenerates
// (TestModelFileIsCurrent fails when the corpus changed and the file did
// not). It is pure Go, loaded once on first use, and evaluated
// leave-one-family-out (TestClassifierGeneralization).

//go:embed classifier_model.txt
var modelFile string

// textModel is a trained model: per class a bias, per feature a weight for
// each class.
type textModel struct {
	classes []Class
	rules   []Rule // DefaultPolicy's row of each class
	bias    []float32
	weights map[string][]float32
}

// builtinModel is the model of classifier_model.txt, parsed on first use.
var builtinModel = sync.OnceValue(func() *textModel {
	m, err := parseModel(modelFile)
	if err != nil {
		panic(fmt.Sprintf("resilience: classifier_model.txt: %v", err))
	}
	return m
})

// minModelWords is how many words the model must know in a text to
// decide it: "something went wrong", "agent failed", "boom" carry too
// little to tell a backend's failure from a caller's, and stay the
// default (provider_error, retried).
const minModelWords = 4

// modelPrediction is the model's answer for one text.
type modelPrediction struct {
	Class Class
	Prob  float64 // the softmax probability of Class
	// DecisionProb is the probability of Class's row of the decision
	// table (Rule): the sum of its classes'.
	DecisionProb float64
	Rule         Rule
}

// predict scores text; the zero prediction when the text has no feature
// the model knows.
func (m *textModel) predict(text string) modelPrediction {
	scores := make([]float64, len(m.classes))
	feats := textFeatures(text)
	known, words := 0, 0
	for _, f := range feats {
		if w, ok := m.weights[f]; ok {
			known++
			if strings.HasPrefix(f, "w:") {
				words++
			}
			for i, x := range w {
				scores[i] += float64(x)
			}
		}
	}
	if known == 0 || words < minModelWords {
		return modelPrediction{}
	}
	// Features are weighed 1/sqrt(n) each, as in training.
	scale := 1 / math.Sqrt(float64(len(feats)))
	max := math.Inf(-1)
	for i := range scores {
		scores[i] = float64(m.bias[i]) + scores[i]*scale
		max = math.Max(max, scores[i])
	}
	sum := 0.0
	for i, s := range scores {
		scores[i] = math.Exp(s - max)
		sum += scores[i]
	}
	// The decision first: the row of the decision table (DefaultPolicy)
	// its classes give the most probability, then that row's most probable
	// class. An unseen family's wording often splits between classes that
	// are decided alike (invalid_request, not_supported, logic_error):
	// their sum, not their largest, says what to do.
	group := make([]float64, len(scores))
	for i := range scores {
		for j := range scores {
			if m.rules[i] == m.rules[j] {
				group[i] += scores[j]
			}
		}
	}
	best := 0
	for i := range scores {
		if group[i] > group[best] || (group[i] == group[best] && scores[i] > scores[best]) {
			best = i
		}
	}
	return modelPrediction{Class: m.classes[best], Prob: scores[best] / sum, DecisionProb: group[best] / sum, Rule: m.rules[best]}
}

// parseModel reads the model file: "#" comment lines, then
//
//	classes	<class> <class> …
//	bias	<w> <w> …
//	<feature>	<w> <w> …   (one weight per class)
func parseModel(s string) (*textModel, error) {
	m := &textModel{weights: map[string][]float32{}}
	for n, line := range strings.Split(s, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		key, vals, ok := strings.Cut(line, "\t")
		if !ok {
			return nil, fmt.Errorf("line %d: no tab", n+1)
		}
		fields := strings.Fields(vals)
		switch key {
		case "classes":
			for _, f := range fields {
				c, err := ParseClass(f)
				if err != nil {
					return nil, fmt.Errorf("line %d: %w", n+1, err)
				}
				m.classes = append(m.classes, c)
			}
			continue
		}
		if len(fields) != len(m.classes) || len(m.classes) == 0 {
			return nil, fmt.Errorf("line %d: %d weights for %d classes", n+1, len(fields), len(m.classes))
		}
		w := make([]float32, len(fields))
		for i, f := range fields {
			x, err := strconv.ParseFloat(f, 32)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n+1, err)
			}
			w[i] = float32(x)
		}
		if key == "bias" {
			m.bias = w
			continue
		}
		m.weights[key] = w
	}
	if m.bias == nil {
		return nil, fmt.Errorf("no bias line")
	}
	m.setRules()
	return m, nil
}

// setRules records each class's row of the default decision table.
func (m *textModel) setRules() {
	p := DefaultPolicy()
	m.rules = make([]Rule, len(m.classes))
	for i, c := range m.classes {
		m.rules[i] = p.Rule(c)
	}
}
