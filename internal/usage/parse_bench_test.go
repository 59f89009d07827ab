package usage

import (
	"encoding/json"
	"strings"
	"testing"
)

// openAIReply is a chat completion of about 4 KiB with its usage.
func openAIReply(tb testing.TB) []byte {
	b, err := json.Marshal(map[string]any{
		"id": "chatcmpl-abc123", "object": "chat.completion", "created": 1700000000, "model": "gpt-4o-2024-08-06",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": strings.Repeat("The quick brown fox jumps over the lazy dog. ", 90)}}},
		"usage": map[string]any{"prompt_tokens": 1200, "completion_tokens": 800, "total_tokens": 2000,
			"prompt_tokens_details": map[string]any{"cached_tokens": 1024}},
	})
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// BenchmarkParse reads the usage of an LLM reply: every task whose agent
// returns one pays it once.
func BenchmarkParse(b *testing.B) {
	body := openAIReply(b)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if u, _ := Parse(body); u.TotalTokens != 2000 {
			b.Fatal(u)
		}
	}
}
