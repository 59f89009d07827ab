package delivery

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGrowStackDoesNotAllocate: the pad stays on the stack (a pad on the
// heap would cost more than the growth it saves).
func TestGrowStackDoesNotAllocate(t *testing.T) {
	require.Zero(t, testing.AllocsPerRun(100, growStack))
	require.False(t, stackPadUsed)
}
