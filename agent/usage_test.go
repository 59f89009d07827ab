package agent_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/usage"
)

// TestStreamUsage: a streamed reply's usage is read from the assembled
// result (the final usage chunk of an OpenAI stream; message_start's input
// and message_delta's output of an Anthropic stream).
func TestStreamUsage(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		frames []string
		want   usage.Usage
		system string
	}{
		{
			// https://platform.openai.com/docs/api-reference/chat-streaming/streaming
			// (stream_options.include_usage: a last chunk with empty
			// choices carries the usage)
			name: "OpenAI chat-completions stream",
			frames: dataFrames(
				`{"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini", "system_fingerprint": "fp_44709d6fcb", "choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`,
				`{"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini", "system_fingerprint": "fp_44709d6fcb", "choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}]}`,
				`{"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini", "system_fingerprint": "fp_44709d6fcb", "choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}`,
				`{"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini", "system_fingerprint": "fp_44709d6fcb", "choices":[],"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21,"prompt_tokens_details":{"cached_tokens":0}}}`,
				`[DONE]`),
			want:   usage.Usage{Model: "gpt-4o-mini", InputTokens: 9, OutputTokens: 12, TotalTokens: 21},
			system: usage.SystemOpenAI,
		},
		{
			// https://docs.anthropic.com/en/docs/build-with-claude/streaming
			// (basic streaming request)
			name: "Anthropic messages stream",
			frames: []string{
				anthropicFrame("message_start", `{"type": "message_start", "message": {"id": "msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY", "type": "message", "role": "assistant", "content": [], "model": "claude-opus-4-20250514", "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 25, "output_tokens": 1}}}`),
				anthropicFrame("content_block_start", `{"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}`),
				anthropicFrame("ping", `{"type": "ping"}`),
				anthropicFrame("content_block_delta", `{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hello"}}`),
				anthropicFrame("content_block_delta", `{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "!"}}`),
				anthropicFrame("content_block_stop", `{"type": "content_block_stop", "index": 0}`),
				anthropicFrame("message_delta", `{"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence":null}, "usage": {"output_tokens": 15}}`),
				anthropicFrame("message_stop", `{"type": "message_stop"}`),
			},
			want:   usage.Usage{Model: "claude-opus-4-20250514", InputTokens: 25, OutputTokens: 15, TotalTokens: 40},
			system: usage.SystemAnthropic,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := sseServer(t, tc.frames, nil)
			h, err := agent.NewHTTP(agent.HTTPConfig{URL: srv.URL})
			require.NoError(t, err)
			data, err := h.Run(context.Background(), agent.Request{TaskID: "t", Agent: "a", Params: json.RawMessage(`{}`)})
			require.NoError(t, err)
			u, system := agent.UsageOf(data, nil)
			require.Equal(t, tc.want, u)
			require.Equal(t, tc.system, system)
		})
	}
}
