package usage

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentq/agentq/internal/amount"
)

// CostCounter is a counter of dollars by labels that counts integer
// nano-dollars (amount.NanoUSD) and divides once, when it is collected:
// a sum of many small costs reads as clean as its decimal terms (a
// thousand calls of a tenth of a cent: 1, not 1.0000000000000007).
type CostCounter struct {
	desc   *prometheus.Desc
	series sync.Map // labels joined by labelSep -> *costSeries
}

// costSeries is one label set's count.
type costSeries struct {
	labels []string
	nanos  atomic.Int64
}

// labelSep joins a series' label values into its key (no label value a
// worker makes holds it).
const labelSep = "\xff"

// NewCostCounter is an empty CostCounter called name (a worker registers
// it).
func NewCostCounter(name, help string, labels ...string) *CostCounter {
	return &CostCounter{desc: prometheus.NewDesc(name, help, labels, nil)}
}

// Add counts usd (≥ 0) in the series of labels.
func (c *CostCounter) Add(usd float64, labels ...string) {
	key := strings.Join(labels, labelSep)
	v, ok := c.series.Load(key)
	if !ok {
		v, _ = c.series.LoadOrStore(key, &costSeries{labels: labels})
	}
	v.(*costSeries).nanos.Add(amount.NanoUSD(usd))
}

// Describe is prometheus.Collector's.
func (c *CostCounter) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect is prometheus.Collector's.
func (c *CostCounter) Collect(ch chan<- prometheus.Metric) {
	c.series.Range(func(_, v any) bool {
		s := v.(*costSeries)
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(s.nanos.Load())/amount.NanosPerUSD, s.labels...)
		return true
	})
}
