package agent_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/resilience"
)

// ExampleFunc: an agent written in Go is a function of the task's
// ActionRequest (registered with worker.WithAgent). It returns the
// result's JSON, or an error the classifier reads (WithClass states the
// verdict: here, dead-letter rather than retry), and may report live
// output while it runs.
func ExampleFunc() {
	summarize := agent.Func(func(ctx context.Context, req agent.Request) (json.RawMessage, error) {
		var p struct{ Text string }
		if err := json.Unmarshal(req.Params, &p); err != nil || p.Text == "" {
			return nil, resilience.WithClass(fmt.Errorf("params: no text"), resilience.InvalidRequest)
		}
		if err := req.EmitJSON(agent.EventProgress, map[string]int{"percent": 50}); err != nil {
			return nil, err
		}
		return json.Marshal(map[string]int{"words": len(p.Text)})
	})

	// The worker calls it once an attempt, with Emit set to record the
	// task's live output; here the events are printed.
	req := agent.Request{TaskID: "t-1", Agent: "summarize", Params: json.RawMessage(`{"text":"hello"}`), Attempt: 1,
		Emit: func(typ string, data json.RawMessage) { fmt.Println("event:", typ, string(data)) }}
	out, err := summarize.Run(context.Background(), req)
	fmt.Println(string(out), err)

	_, err = summarize.Run(context.Background(), agent.Request{TaskID: "t-2", Params: json.RawMessage(`{}`)})
	fmt.Println(resilience.Classify(err).Class, err)
	// Output:
	// event: progress {"percent":50}
	// {"words":5} <nil>
	// invalid_request params: no text
}
