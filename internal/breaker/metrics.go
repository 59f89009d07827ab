package breaker

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// StateGauge is agentq_breaker_state{key,state}: for each breaker key a
// worker gated on (or probed), one series per state (closed, half_open,
// open), 1 for the state it last saw and 0 for the others. A collector rather
// than a gauge vector: each key's state is one atomic value, so a scrape
// never sees a key in two states or in none.
type StateGauge struct {
	desc *prometheus.Desc
	keys sync.Map // breaker key -> *atomic.Int32, an index of stateNames
}

// stateNames are the state label's values, in the order of
// StateGauge's indexes; the first, closed, is also that of a state the
// breaker package does not name.
var stateNames = []State{StateClosed, StateHalfOpen, StateOpen}

// NewStateGauge is an empty StateGauge (a worker registers it).
func NewStateGauge() *StateGauge {
	return &StateGauge{desc: prometheus.NewDesc("agentq_breaker_state",
		"Breaker state last seen by this worker, by breaker key: 1 for the key's state (closed, half_open, open), 0 for the others.",
		[]string{"key", "state"}, nil)}
}

// Set notes st as key's state.
func (b *StateGauge) Set(key string, st State) {
	i := max(slices.Index(stateNames, st), 0)
	v, ok := b.keys.Load(key)
	if !ok {
		v, _ = b.keys.LoadOrStore(key, new(atomic.Int32))
	}
	v.(*atomic.Int32).Store(int32(i))
}

// Describe is prometheus.Collector's.
func (b *StateGauge) Describe(ch chan<- *prometheus.Desc) { ch <- b.desc }

// Collect is prometheus.Collector's.
func (b *StateGauge) Collect(ch chan<- prometheus.Metric) {
	b.keys.Range(func(k, v any) bool {
		cur := int(v.(*atomic.Int32).Load())
		for i, st := range stateNames {
			val := 0.0
			if i == cur {
				val = 1
			}
			ch <- prometheus.MustNewConstMetric(b.desc, prometheus.GaugeValue, val, k.(string), string(st))
		}
		return true
	})
}
