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

// skipStringLoop is SkipString as it was, byte by byte: the reference
// FuzzSkipString holds the quote-to-quote jumps to.
func skipStringLoop(b []byte, i int) (int, bool) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1, true
		}
	}
	return 0, false
}

func FuzzSkipString(f *testing.F) {
	for _, in := range []string{`"a"`, `"a\"b",1`, `"a\\"b"`, `"\\\\\"x"`, `"abc\`, `"`, `"\\`, `"a\\\"`, `""`} {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 || b[0] != '"' {
			return
		}
		end, ok := SkipString(b, 0)
		wantEnd, wantOK := skipStringLoop(b, 0)
		if end != wantEnd || ok != wantOK {
			t.Fatalf("SkipString(%q) = %d, %v; want %d, %v", b, end, ok, wantEnd, wantOK)
		}
	})
}
