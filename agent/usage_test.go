package agent_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/internal/usage"
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
			// A captured stream (stream_options.include_usage: every chunk
			// has "usage":null but the last, whose choices are empty):
			// langchain-ai/langchain@26078fd9
			// libs/partners/openai/tests/unit_tests/chat_models/test_base.py,
			// OPENAI_STREAM_DATA, one data: frame per line.
			name: "OpenAI chat-completions stream",
			frames: dataFrames(
				`{"id":"chatcmpl-9nhARrdUiJWEMd5plwV1Gc9NCjb9M","object":"chat.completion.chunk","created":1721631035,"model":"gpt-4o-2024-05-13","system_fingerprint":"fp_18cc0f1fa0","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":null}`,
				`{"id":"chatcmpl-9nhARrdUiJWEMd5plwV1Gc9NCjb9M","object":"chat.completion.chunk","created":1721631035,"model":"gpt-4o-2024-05-13","system_fingerprint":"fp_18cc0f1fa0","choices":[{"index":0,"delta":{"content":"我是"},"logprobs":null,"finish_reason":null}],"usage":null}`,
				`{"id":"chatcmpl-9nhARrdUiJWEMd5plwV1Gc9NCjb9M","object":"chat.completion.chunk","created":1721631035,"model":"gpt-4o-2024-05-13","system_fingerprint":"fp_18cc0f1fa0","choices":[{"index":0,"delta":{"content":"助手"},"logprobs":null,"finish_reason":null}],"usage":null}`,
				`{"id":"chatcmpl-9nhARrdUiJWEMd5plwV1Gc9NCjb9M","object":"chat.completion.chunk","created":1721631035,"model":"gpt-4o-2024-05-13","system_fingerprint":"fp_18cc0f1fa0","choices":[{"index":0,"delta":{"content":"。"},"logprobs":null,"finish_reason":null}],"usage":null}`,
				`{"id":"chatcmpl-9nhARrdUiJWEMd5plwV1Gc9NCjb9M","object":"chat.completion.chunk","created":1721631035,"model":"gpt-4o-2024-05-13","system_fingerprint":"fp_18cc0f1fa0","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}`,
				`{"id":"chatcmpl-9nhARrdUiJWEMd5plwV1Gc9NCjb9M","object":"chat.completion.chunk","created":1721631035,"model":"gpt-4o-2024-05-13","system_fingerprint":"fp_18cc0f1fa0","choices":[],"usage":{"prompt_tokens":14,"completion_tokens":3,"total_tokens":17}}`,
				`[DONE]`),
			want:   usage.Usage{Model: "gpt-4o-2024-05-13", InputTokens: 14, OutputTokens: 3, TotalTokens: 17},
			system: usage.SystemOpenAI,
		},
		{
			// A recorded stream, byte for byte (the padding after each event's
			// JSON included): anthropics/anthropic-sdk-python@009b0353
			// tests/lib/_parse/__inline_snapshot__/test_messages/TestAsyncStream/
			// a8b7dbb8-2321-4624-abdb-7ba2136b5c38.json, the 200 reply's body.
			// message_start's usage has the input (output_tokens 1);
			// message_delta's is cumulative (output_tokens 10, the input
			// counts again) and replaces it key by key.
			name: "Anthropic messages stream",
			frames: []string{`event: message_start
data: {"type":"message_start","message":{"model":"claude-sonnet-4-5-20250929","id":"msg_013nnniYDrJDocdy5nrMU7cH","type":"message","role":"assistant","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":135,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":0},"output_tokens":1,"service_tier":"standard","inference_geo":"not_available"}}   }

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}     }

event: ping
data: {"type": "ping"}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"["}             }

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"12"}   }

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"345,"}    }

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"67890]"}               }

event: content_block_stop
data: {"type":"content_block_stop","index":0        }

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":135,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":10}             }

event: message_stop
data: {"type":"message_stop"              }

`},
			want:   usage.Usage{Model: "claude-sonnet-4-5-20250929", InputTokens: 135, OutputTokens: 10, TotalTokens: 145},
			system: usage.SystemAnthropic,
		},
		{
			// The SDK's stream fixture of the older shape, whose message_delta
			// has output_tokens only: anthropics/anthropic-sdk-python@009b0353
			// tests/lib/streaming/fixtures/basic_response.txt.
			name: "Anthropic messages stream, output only in message_delta",
			frames: []string{`event: message_start
data: {"type":"message_start","message":{"id":"msg_4QpJur2dWWDjF6C758FbBw5vm12BaVipnK","type":"message","role":"assistant","content":[],"model":"claude-3-opus-latest","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":11,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: ping
data: {"type": "ping"}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" there"}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"!"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":6}}

event: message_stop
data: {"type":"message_stop"}`},
			want:   usage.Usage{Model: "claude-3-opus-latest", InputTokens: 11, OutputTokens: 6, TotalTokens: 17},
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
			u, system := usage.Of(data, nil)
			require.Equal(t, tc.want, u)
			require.Equal(t, tc.system, system)
		})
	}
}
