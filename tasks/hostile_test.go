package tasks

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
)

// TestClientRefusesControlCharacters (#23 item 4): the Go client refuses a
// task whose id, agent, action or correlation ID holds a control or bidi
// formatting character, and the IDs "." and "..", with a
// *ValidationError naming the field (Enqueue; EnqueueMany wraps it in a
// *TaskError naming the index); Cancel refuses such a reason. Nothing is
// written. A delay past MaxDelay (ProcessIn, ProcessAt) is refused the
// same way, naming "in" (#23 item 6).
func TestClientRefusesControlCharacters(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	c := NewClient(rdb)
	for _, tc := range []struct {
		name  string
		task  Task
		opts  []EnqueueOption
		field string
	}{
		{"id ESC", Task{ID: "a\x1b]0;t\ab", Agent: "tool"}, nil, "id"},
		{"id NUL", Task{ID: "a\x00b", Agent: "tool"}, nil, "id"},
		{"id C1", Task{ID: "a\u009db", Agent: "tool"}, nil, "id"},
		{"id bidi", Task{ID: "a\u202db", Agent: "tool"}, nil, "id"},
		{"id dot", Task{ID: ".", Agent: "tool"}, nil, "id"},
		{"id dot dot", Task{ID: "..", Agent: "tool"}, nil, "id"},
		{"agent", Task{Agent: "to\x1b[2Jol"}, nil, "agent"},
		{"agent bidi", Task{Agent: "to\u2069ol"}, nil, "agent"},
		{"action", Task{Agent: "tool", Action: "x\x1b[1A\x1b[2K"}, nil, "action"},
		{"action DEL", Task{Agent: "tool", Action: "x\x7f"}, nil, "action"},
		{"action LRM", Task{Agent: "tool", Action: "x\u200e"}, nil, "action"},
		{"correlation id", Task{Agent: "tool", CorrelationID: "c\r\n"}, nil, "correlation_id"},
		{"correlation id ALM", Task{Agent: "tool", CorrelationID: "c\u061c"}, nil, "correlation_id"},
		{"process in past the cap", Task{Agent: "tool"}, []EnqueueOption{ProcessIn(MaxDelay + time.Second)}, "in"},
		{"process in near the largest duration", Task{Agent: "tool"}, []EnqueueOption{ProcessIn(2561900 * time.Hour)}, "in"},
		{"process at past the cap", Task{Agent: "tool"}, []EnqueueOption{ProcessAt(time.Now().Add(MaxDelay + time.Hour))}, "in"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := c.Enqueue(ctx, tc.task, tc.opts...)
			var ve *ValidationError
			require.ErrorAs(t, err, &ve)
			require.Equal(t, tc.field, ve.Field, err.Error())
			require.ErrorIs(t, err, ErrInvalidEnvelope)
			require.Contains(t, err.Error(), `field "`+tc.field+`"`)

			_, err = c.EnqueueMany(ctx, []Task{{Agent: "tool"}, tc.task}, tc.opts...)
			require.ErrorAs(t, err, &ve)
			require.Equal(t, tc.field, ve.Field)
			var te *TaskError
			if tc.field != "in" { // a delay is the batch's, not a task's
				require.ErrorAs(t, err, &te)
				require.Equal(t, 1, te.Index)
			}

			if tc.field != "in" { // options are not the task's
				require.ErrorAs(t, tc.task.Check(nil), &ve, "Task.Check (the API's and enqueuer's) agrees")
				require.Equal(t, tc.field, ve.Field)
			}
		})
	}
	keys, err := rdb.Keys(ctx, "*").Result()
	require.NoError(t, err)
	require.Empty(t, keys, "nothing was written")

	// At the cap and with printable Unicode: accepted.
	res, err := c.Enqueue(ctx, Task{ID: "ok-✓", Agent: "outil", Action: "résumé", CorrelationID: "日本"}, ProcessIn(MaxDelay))
	require.NoError(t, err)
	require.Equal(t, StateScheduled, res.State)

	_, err = c.Cancel(ctx, "ok-✓", "why\x1b[2J")
	var ve *ValidationError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "reason", ve.Field)
	v, err := c.Store().Get(ctx, "ok-✓")
	require.NoError(t, err)
	require.Equal(t, StateScheduled, v.State, "not canceled")
}

// TestCheckText: what CheckText refuses and accepts, and that its
// message names the field and the character.
func TestCheckText(t *testing.T) {
	t.Parallel()
	for _, r := range []rune{0, 0x07, 0x09, 0x0a, 0x1b, 0x1f, 0x7f, 0x80, 0x85, 0x9b, 0x9f,
		0x061c, 0x200e, 0x200f, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069} {
		err := CheckText("action", "ab"+string(r))
		var ve *ValidationError
		require.True(t, errors.As(err, &ve), "U+%04X", r)
		require.Equal(t, "action", ve.Field)
		require.Contains(t, ve.Reason, "at byte 2")
	}
	for _, s := range []string{"", "plain", "ünïcode ✓ 日本", "a b\u00a0c", "\u200b", "\u2028"} {
		require.NoError(t, CheckText("action", s), "%q", s)
	}
	require.Error(t, CheckText("action", "bad\xff"))
}
