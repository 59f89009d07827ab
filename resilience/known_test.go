package resilience

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheckKnown(t *testing.T) {
	t.Parallel()
	many := make([]string, 25)
	for i := range many {
		many[i] = fmt.Sprintf("k%02d", i)
	}
	for _, tc := range []struct {
		name                 string
		key                  string
		configured, recorded []string
		want                 string // "" when known
	}{
		{"configured", "a", []string{"a"}, nil, ""},
		{"recorded", "b", nil, []string{"b"}, ""},
		{"none known", "x", nil, nil, `no agent uses breaker key "x" and Redis has no record of it (known breaker keys: none)`},
		{"both, sorted, once", "x", []string{"c", "a"}, []string{"a", "b"}, `(known breaker keys: "a", "b", "c")`},
		{"long list cut", "x", many, nil, `"k19" and 5 more)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := CheckKnown("breaker", tc.key, tc.configured, tc.recorded)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrUnknownKey)
			var uk *UnknownKeyError
			require.True(t, errors.As(err, &uk))
			require.Equal(t, tc.key, uk.Key)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}
