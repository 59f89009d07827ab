package tasks

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRequestTask: the one check every producer (HTTP API, enqueuer,
// enqueuer --file) runs on a task request, naming the bad field.
func TestRequestTask(t *testing.T) {
	t.Parallel()
	served := []string{"default", "high"}
	for _, tc := range []struct {
		name  string
		req   Request
		field string
		delay time.Duration
	}{
		{name: "minimal", req: Request{Agent: "a"}},
		{name: "full", req: Request{ID: "j-1", Agent: "a", Params: []byte(`{"x":1}`), Queue: "high", In: "90s"}, delay: 90 * time.Second},
		{name: "no agent", req: Request{}, field: "agent"},
		{name: "run separator", req: Request{ID: "x#1", Agent: "a"}, field: "id"},
		{name: "queue not served", req: Request{Agent: "a", Queue: "low"}, field: "queue"},
		{name: "bad params", req: Request{Agent: "a", Params: []byte(`{`)}, field: "params"},
		{name: "bad in", req: Request{Agent: "a", In: "soon"}, field: "in"},
		{name: "negative in", req: Request{Agent: "a", In: "-1s"}, field: "in"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			task, delay, err := tc.req.Task(served)
			if tc.field == "" {
				require.NoError(t, err)
				require.Equal(t, tc.req.Agent, task.Agent)
				require.Equal(t, tc.delay, delay)
				return
			}
			var ve *ValidationError
			require.True(t, errors.As(err, &ve), "%v", err)
			require.Equal(t, tc.field, ve.Field)
		})
	}
	_, _, err := Request{Agent: "a", Queue: "anything"}.Task(nil)
	require.NoError(t, err, "nil served: any queue (a Go client without WithQueues)")
}
