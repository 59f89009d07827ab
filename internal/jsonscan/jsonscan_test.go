package jsonscan

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSkipValue(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int{
		`"a\"b",1`: 6, `{"a":"}"},`: 9, `[1,[2,{}]] `: 10, `12.5e3}`: 6, `true,`: 4, `null]`: 4,
	} {
		end, ok := SkipValue([]byte(in), 0)
		require.True(t, ok, in)
		require.Equal(t, want, end, in)
	}
	for _, in := range []string{``, `"abc`, `{"a":1`, `[[]`, `,`} {
		_, ok := SkipValue([]byte(in), 0)
		require.False(t, ok, in)
	}
	require.Equal(t, 3, SkipSpace([]byte(" \t\nx"), 0))
}
