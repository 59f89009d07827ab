package record

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/usage"
)

// FuzzEventMarshal: Event.Marshal writes the bytes json.Marshal writes.
func FuzzEventMarshal(f *testing.F) {
	f.Add(int64(7), int64(1700000000123456789), "succeeded", 1, 0, "noop", "", "", int64(0), int64(3), "host:12", 0, int64(0), 0, true, "", "", false, "", int64(0), int64(0), int64(0), int64(0), 0.0, false, "")
	f.Add(int64(0), int64(0), "deferred", 0, 2, "", "c", `breaker "x" is open`, int64(500), int64(0), "", 3, int64(1700000000000000000), 0, false, "", "", false, "", int64(0), int64(0), int64(0), int64(0), 0.0, false, "x\"y")
	f.Add(int64(-3), int64(-62167219200000000), "history_elided", 0, 0, "a<b", "x&y", "é\u2028", int64(-1), int64(-2), "w", 0, int64(5), 7, true, "", "over_budget: budget \"agent llm\" tokens 5/1h0m0s", false, "", int64(0), int64(0), int64(0), int64(0), 0.0, false, "<b>")
	f.Add(int64(1), int64(1700000000123456789), "task_canceled", 0, 0, "", "", "canceled: user left", int64(0), int64(0), "", 0, int64(0), 0, true, "user left", "", false, "", int64(0), int64(0), int64(0), int64(0), 0.0, false, "")
	f.Add(int64(1<<53), int64(1700000000123456789), "dead_lettered", 3, 1, "llm", "timeout", "slow", int64(0), int64(1200), "w-1", 0, int64(0), 0, true, "restarts_exhausted", "breaker_open", false, "", int64(0), int64(0), int64(0), int64(0), 0.0, false, "default")
	f.Add(int64(2), int64(1700000000123456789), "succeeded", 1, 0, "llm", "", "", int64(0), int64(900), "w", 0, int64(0), 0, true, "", "",
		true, "gpt-4o", int64(1200), int64(80), int64(1024), int64(1280), 0.00312, true, "structure")
	f.Add(int64(2), int64(1700000000123456789), "retrying", 2, 0, "llm", "timeout", "slow", int64(500), int64(900), "w", 0, int64(0), 0, true, "", "",
		true, "", int64(0), int64(0), int64(0), int64(12), 1e-9, false, "text")
	f.Add(int64(2), int64(1700000000123456789), "succeeded", 1, 0, "llm", "", "", int64(0), int64(900), "w", 0, int64(0), 0, true, "", "",
		true, "m\"x", int64(-1), int64(1<<62), int64(0), int64(0), -2.5e21, true, "model")
	f.Fuzz(func(t *testing.T, seq, at int64, event string, attempt, restart int, agent, class, errText string, delay, dur int64,
		worker string, count int, since int64, attempts int, utc bool, reason, fallback string,
		used bool, model string, in, out, cached, total int64, cost float64, priced bool, by string) {
		ev := Event{Seq: seq, At: time.Unix(0, at), Event: event, Attempt: attempt, Restart: restart, Agent: agent, ErrorClass: class,
			ClassifiedBy: by, Error: errText, DelayMS: delay, DurationMS: dur, Worker: worker, Count: count, Attempts: attempts, Reason: reason, Fallback: fallback,
			Lost: count%2 != 0}
		if used {
			ev.Usage = &usage.Usage{Model: model, InputTokens: in, OutputTokens: out, CachedTokens: cached, TotalTokens: total,
				CostUSD: cost, Priced: priced}
		}
		if since != 0 {
			ev.Since = time.Unix(0, since)
		}
		if utc {
			ev.At, ev.Since = ev.At.UTC(), ev.Since.UTC()
		}
		want, _ := json.Marshal(ev)
		if got := ev.Marshal(); string(got) != string(want) {
			t.Fatalf("Marshal wrote %s, json.Marshal %s", got, want)
		}
	})
}
