package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/agent"
)

// stepLog records what a call's Emit and RecordStep got, in one order.
type stepLog struct {
	mu  sync.Mutex
	got []string
}

func (l *stepLog) emit(typ string, data json.RawMessage) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, typ+" "+string(data))
}

func (l *stepLog) step(_ context.Context, s agent.StepEvent) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s.TooLarge > 0 {
		l.got = append(l.got, "step "+s.Name+" too large")
		return nil
	}
	l.got = append(l.got, "step "+s.Name+" "+string(s.Data)+" "+string(s.Usage))
	return nil
}

// TestExecSteps: an exec agent's step lines reach RecordStep in order with
// its other events, their data compacted; a step line larger than the
// events buffer is read whole, and one over MaxStepLine is reported too
// large, never dropped silently.
func TestExecSteps(t *testing.T) {
	t.Parallel()
	e := newExec(t, agent.ExecConfig{})
	big := strings.Repeat("b", agent.MaxEventData+100)
	huge := strings.Repeat("h", agent.MaxStepLine)
	params, _ := json.Marshal(map[string]any{
		"mode": "events",
		"lines": []string{
			`{"type":"progress","data":1}`,
			`{"type":"step","name":"plan","data":{ "a" : 1 },"usage":{"total_tokens":7}}`,
			`{"type":"output","data":2}`,
			`{"type":"step","name":"big","data":"` + big + `"}`,
			`{"type":"step","name":"huge","data":"` + huge + `"}`,
			`{"type":"step","name":"last","data":null}`,
		},
	})
	log := &stepLog{}
	r := req("t-steps", string(params))
	r.Emit, r.RecordStep = log.emit, log.step
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := e.Run(ctx, r)
	if err != nil {
		t.Fatalf("run: %.300s", err.Error())
	}
	short := func(l []string) []string {
		out := make([]string, len(l))
		for i, s := range l {
			out[i] = strings.ReplaceAll(s, big, "<big>")
		}
		return out
	}
	require.Equal(t, []string{
		`progress 1`,
		`step plan {"a":1} {"total_tokens":7}`,
		`output 2`,
		`step big "<big>" `,
		`step huge too large`,
		`step last null `,
	}, short(log.got))
}

// TestRequestSteps: the ActionRequest carries the steps recorded so far
// (and no steps member when there are none).
func TestRequestSteps(t *testing.T) {
	t.Parallel()
	e := newExec(t, agent.ExecConfig{})
	r := req("t-req", `{"mode":"request"}`)
	data, err := e.Run(context.Background(), r)
	require.NoError(t, err)
	require.NotContains(t, string(data), `"steps"`)
	r.Steps = map[string]json.RawMessage{"plan": json.RawMessage(`{"a":1}`)}
	data, err = e.Run(context.Background(), r)
	require.NoError(t, err)
	var got struct {
		Steps map[string]json.RawMessage `json:"steps"`
	}
	require.NoError(t, json.Unmarshal(data, &got))
	require.JSONEq(t, `{"a":1}`, string(got.Steps["plan"]))
}

// TestGoStep: Request.Step returns a recorded step's data without running
// its function; otherwise it runs it, records its result (with a
// StepResult's usage) and returns it; an error recording it is returned.
func TestGoStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var recorded []agent.StepEvent
	r := agent.Request{
		Steps: map[string]json.RawMessage{"done": json.RawMessage(`"kept"`)},
		RecordStep: func(_ context.Context, s agent.StepEvent) error {
			if s.Name == "refused" {
				return errors.New("over the cap")
			}
			recorded = append(recorded, s)
			return nil
		},
	}
	ran := 0
	fn := func(v any) func(context.Context) (any, error) {
		return func(context.Context) (any, error) { ran++; return v, nil }
	}
	data, err := r.Step(ctx, "done", fn("again"))
	require.NoError(t, err)
	require.JSONEq(t, `"kept"`, string(data))
	require.Zero(t, ran)

	data, err = r.Step(ctx, "new", fn(agent.StepResult{Data: map[string]int{"n": 1}, Usage: json.RawMessage(`12`)}))
	require.NoError(t, err)
	require.JSONEq(t, `{"n":1}`, string(data))
	require.Equal(t, 1, ran)
	require.Len(t, recorded, 1)
	require.Equal(t, "new", recorded[0].Name)
	require.JSONEq(t, `12`, string(recorded[0].Usage))

	_, err = r.Step(ctx, "refused", fn(1))
	require.ErrorContains(t, err, "over the cap")
	_, err = r.Step(ctx, "failing", func(context.Context) (any, error) { return nil, errors.New("boom") })
	require.ErrorContains(t, err, "boom")

	_, err = agent.Request{}.Step(ctx, "x", fn(1))
	require.ErrorIs(t, err, agent.ErrNoSteps)
}
