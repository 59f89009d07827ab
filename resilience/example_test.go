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
	fmt.Println(resilience.Classify(errors.New("something odd")).Class)
	// Output:
	// rate_limited 7s
	// invalid_request
	// network_transient
	// provider_error
}
