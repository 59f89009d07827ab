package resilience_test

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/agentq/agentq/resilience"
)

// ExampleClassify: what the worker makes of a failed call. A Go agent
// hands the classifier the HTTP status and headers it got in a Failure,
// states its own verdict with WithClass, or returns any error, whose text
// and chain are read.
func ExampleClassify() {
	tooMany := &resilience.Failure{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"7"}}}
	v := resilience.Classify(tooMany)
	fmt.Println(v.Class, v.RetryAfter)

	badInput := resilience.WithClass(errors.New("params: no text"), resilience.InvalidRequest)
	fmt.Println(resilience.Classify(badInput).Class)

	fmt.Println(resilience.Classify(errors.New("read tcp: connection reset by peer")).Class)
	// By says which kind of evidence decided: here an SDK exception's name
	// (structure); what structure and the tables leave open, the learned
	// model decides (model), and Weak asks an operator to look (inspector
	// classify --unmatched).
	v = resilience.Classify(errors.New("InsufficientCreditsError: add credits to continue"))
	fmt.Println(v.Class, v.By)
	// Output:
	// rate_limited 7s
	// invalid_request
	// network_transient
	// quota_exhausted structure
}
