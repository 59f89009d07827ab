package tasks

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
)

// TestTenantPriorityValidation (#28, #35 item 11): a task's tenant is at
// most MaxTenantLen bytes of valid UTF-8 without control or
// bidirectional formatting characters, nor (for producers) format
// characters, spaces and other separators or default-ignorable
// characters, which make look-alike tenants; its priority one of high,
// normal, low (case-sensitive); a bad one is a *ValidationError naming
// the field, from Task.Check, Request.Task, the Client and Decode alike,
// except that Decode still runs a payload queued before producers
// refused invisible characters (old).
func TestTenantPriorityValidation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name             string
		tenant, priority string
		field            string // "" when valid
		msg              string
		old              bool // Decode accepts it (queued before it was refused)
	}{
		{"default tenant, no priority", "", "", "", "", false},
		{"named tenant", "team-a", PriorityHigh, "", "", false},
		{"unicode tenant", "équipe/β_1", PriorityLow, "", "", false},
		{"longest tenant", strings.Repeat("t", MaxTenantLen), PriorityNormal, "", "", false},
		{"tenant too long", strings.Repeat("t", MaxTenantLen+1), "", "tenant", "at most 128", false},
		{"tenant invalid UTF-8", "a\xffb", "", "tenant", "UTF-8", false},
		{"tenant control character", "a\x1b[2Jb", "", "tenant", "control character", false},
		{"tenant newline", "a\nb", "", "tenant", "control character", false},
		{"tenant bidi", "a\u202eb", "", "tenant", "bidirectional", false},
		{"tenant zero width space", "acme\u200b", "", "tenant", "format character (U+200B at byte 4)", true},
		{"tenant BOM", "\ufeffacme", "", "tenant", "format character (U+FEFF at byte 0)", true},
		{"tenant soft hyphen", "ac\u00adme", "", "tenant", "format character (U+00AD", true},
		{"tenant line separator", "acme\u2028", "", "tenant", "space or separator (U+2028", true},
		{"tenant paragraph separator", "acme\u2029", "", "tenant", "space or separator (U+2029", true},
		{"tenant space", "acme corp", "", "tenant", "space or separator (U+0020", true},
		{"tenant no-break space", "acme\u00a0corp", "", "tenant", "space or separator (U+00A0", true},
		{"tenant ideographic space", "acme\u3000", "", "tenant", "space or separator (U+3000", true},
		{"tenant hangul filler", "acme\u3164", "", "tenant", "default-ignorable character (U+3164", true},
		{"tenant variation selector", "acme\ufe0f", "", "tenant", "default-ignorable character (U+FE0F", true},
		{"priority upper case", "", "HIGH", "priority", "high, normal, low", false},
		{"priority unknown", "t", "urgent", "priority", `"urgent"`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			errs := map[string]error{
				"Task.Check":  Task{Agent: "tool", Tenant: tc.tenant, Priority: tc.priority}.Check(nil),
				"CheckTenant": CheckTenant(tc.tenant),
			}
			if tc.field != "tenant" {
				delete(errs, "CheckTenant")
			}
			_, _, errs["Request.Task"] = Request{Agent: "tool", Tenant: tc.tenant, Priority: tc.priority}.Task(nil)
			if utf8.ValidString(tc.tenant) { // JSON has no invalid UTF-8 (encoding/json reads U+FFFD)
				payload, _ := json.Marshal(map[string]string{"id": "a", "agent": "tool", "tenant": tc.tenant, "priority": tc.priority})
				_, err := Decode(payload)
				if tc.old {
					require.NoError(t, err, "Decode runs a payload queued before")
				} else {
					errs["Decode"] = err
				}
			}
			for name, err := range errs {
				if tc.field == "" {
					require.NoError(t, err, name)
					continue
				}
				var ve *ValidationError
				require.ErrorAs(t, err, &ve, name)
				require.Equal(t, tc.field, ve.Field, name)
				require.Contains(t, err.Error(), tc.msg, name)
				require.ErrorIs(t, err, ErrInvalidEnvelope, name)
			}
		})
	}
}

// TestEnqueueKeepsTenantAndPriority (#28): every way of enqueueing (a
// caller's ID through the enqueue script, a generated ID through the
// lean script, EnqueueMany) puts the tenant and priority in the run's
// payload and in the record, which shows them; normal priority is stored
// as nothing and shown as "normal", the default tenant is not shown.
func TestEnqueueKeepsTenantAndPriority(t *testing.T) {
	t.Parallel()
	for _, b := range redistest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			rdb, _ := b.New(t)
			ctx := context.Background()
			c := NewClient(rdb)
			insp := asynq.NewInspectorFromRedisClient(rdb)
			ids := map[string][2]string{} // task ID → want tenant, priority (as shown)

			res, err := c.Enqueue(ctx, Task{ID: "caller", Agent: "tool", Tenant: "team-a", Priority: PriorityHigh})
			require.NoError(t, err)
			ids[res.ID] = [2]string{"team-a", PriorityHigh}
			res, err = c.Enqueue(ctx, Task{Agent: "tool", Tenant: "équipe_b", Priority: PriorityLow})
			require.NoError(t, err)
			ids[res.ID] = [2]string{"équipe_b", PriorityLow}
			res, err = c.Enqueue(ctx, Task{ID: "later", Agent: "tool", Tenant: "team-c", Priority: PriorityLow}, ProcessIn(time.Hour))
			require.NoError(t, err)
			ids[res.ID] = [2]string{"team-c", PriorityLow}
			many, err := c.EnqueueMany(ctx, []Task{
				{ID: "many-1", Agent: "tool", Tenant: "team-d", Priority: PriorityNormal},
				{ID: "many-2", Agent: "tool"},
			})
			require.NoError(t, err)
			ids[many[0].ID] = [2]string{"team-d", PriorityNormal}
			ids[many[1].ID] = [2]string{"", PriorityNormal}

			payloads := map[string][]byte{}
			for id := range ids { // by the task hash: a tenant's run waits in its lane, not asynq's pending list
				ti, err := insp.GetTaskInfo(DefaultQueue, id)
				require.NoError(t, err, id)
				payloads[id] = ti.Payload
			}
			for id, want := range ids {
				require.Contains(t, payloads, id)
				env, err := Decode(payloads[id])
				require.NoError(t, err, id)
				require.Equal(t, want[0], env.Tenant, id)
				require.Equal(t, want[1], PriorityOf(env.Priority), id)
				if want[1] == PriorityNormal {
					require.NotContains(t, string(payloads[id]), `"priority"`, "normal is stored as nothing")
				}
				v, err := c.Store().Get(ctx, id)
				require.NoError(t, err, id)
				require.Equal(t, want[0], v.Tenant, id)
				require.Equal(t, want[1], v.Priority, id)
				js, err := json.Marshal(v)
				require.NoError(t, err)
				require.Contains(t, string(js), `"priority":"`+want[1]+`"`)
				if want[0] == "" {
					require.NotContains(t, string(js), `"tenant"`, "the default tenant is not shown")
				}
			}

			_, err = c.Enqueue(ctx, Task{ID: "bad", Agent: "tool", Priority: "Low"})
			var ve *ValidationError
			require.ErrorAs(t, err, &ve)
			require.Equal(t, "priority", ve.Field)
			_, err = c.EnqueueMany(ctx, []Task{{ID: "bad", Agent: "tool", Tenant: "a\tb"}})
			require.ErrorAs(t, err, &ve)
			require.Equal(t, "tenant", ve.Field)
		})
	}
}

// TestEnvelopeTenantPriorityRoundTrip (#28): Encode writes the tenant and
// priority (the fast marshal as encoding/json does), Decode's fast path
// reads them, and a copy of the envelope (a restart, a deadline's dead
// letter) keeps them.
func TestEnvelopeTenantPriorityRoundTrip(t *testing.T) {
	t.Parallel()
	in := &Envelope{ID: "t1", Agent: "llm", Queue: "q", Tenant: "team-a", Priority: PriorityHigh, EnqueuedAt: time.Now().UTC()}
	b, err := Encode(in)
	require.NoError(t, err)
	want, err := json.Marshal(in)
	require.NoError(t, err)
	require.Equal(t, string(want), string(b))
	require.Contains(t, string(b), `"tenant":"team-a","priority":"high"`)
	var fast Envelope
	require.True(t, decodeFast(b, &fast), "%s", b)
	require.Equal(t, "team-a", fast.Tenant)
	out, err := Decode(b)
	require.NoError(t, err)
	require.Equal(t, in.Tenant, out.Tenant)
	require.Equal(t, in.Priority, out.Priority)

	// A hand-written "normal" is read as the normalised empty priority.
	out, err = Decode([]byte(`{"id":"a","agent":"t","priority":"normal"}`))
	require.NoError(t, err)
	require.Empty(t, out.Priority)
	require.Equal(t, PriorityNormal, PriorityOf(out.Priority))
}
