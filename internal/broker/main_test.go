package broker_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks, after every test and cleanup, that no waiter goroutine
// outlived its Stop.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
