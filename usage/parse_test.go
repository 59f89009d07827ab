package usage

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestParse reads the usage of the providers' reply bodies, as their API
// references show them (each case names its source).
func TestParse(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, body string
		want       Usage
		system     string
	}{
		{
			// https://platform.openai.com/docs/api-reference/chat/object
			name: "OpenAI chat completion",
			body: `{
  "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
  "object": "chat.completion",
  "created": 1741570283,
  "model": "gpt-4o-2024-08-06",
  "choices": [
    {
      "index": 0,
      "message": {
        "role": "assistant",
        "content": "The image shows a wooden boardwalk path running through a lush green field or meadow. The sky is bright blue with some scattered clouds, giving the scene a serene and peaceful atmosphere. Trees and shrubs are visible in the background.",
        "refusal": null,
        "annotations": []
      },
      "logprobs": null,
      "finish_reason": "stop"
    }
  ],
  "usage": {
    "prompt_tokens": 1117,
    "completion_tokens": 46,
    "total_tokens": 1163,
    "prompt_tokens_details": {
      "cached_tokens": 0,
      "audio_tokens": 0
    },
    "completion_tokens_details": {
      "reasoning_tokens": 0,
      "audio_tokens": 0,
      "accepted_prediction_tokens": 0,
      "rejected_prediction_tokens": 0
    }
  },
  "service_tier": "default",
  "system_fingerprint": "fp_fc9f1d7035"
}`,
			want:   Usage{Model: "gpt-4o-2024-08-06", InputTokens: 1117, OutputTokens: 46, TotalTokens: 1163},
			system: SystemOpenAI,
		},
		{
			// https://platform.openai.com/docs/guides/prompt-caching (the
			// usage of a reply whose prompt was partly cached)
			name: "OpenAI chat completion, cached prompt",
			body: `{"object":"chat.completion","model":"gpt-4o","usage": {
  "prompt_tokens": 2006,
  "completion_tokens": 300,
  "total_tokens": 2306,
  "prompt_tokens_details": {
    "cached_tokens": 1920
  },
  "completion_tokens_details": {
    "reasoning_tokens": 0,
    "accepted_prediction_tokens": 0,
    "rejected_prediction_tokens": 0
  }
}}`,
			want:   Usage{Model: "gpt-4o", InputTokens: 2006, OutputTokens: 300, CachedTokens: 1920, TotalTokens: 2306},
			system: SystemOpenAI,
		},
		{
			// https://platform.openai.com/docs/api-reference/responses/object
			name: "OpenAI Responses",
			body: `{
  "id": "resp_67ccd3a9da748190baa7f1570fe91ac604becb25c7f5aa5b",
  "object": "response",
  "created_at": 1741476777,
  "status": "completed",
  "error": null,
  "incomplete_details": null,
  "instructions": null,
  "max_output_tokens": null,
  "model": "gpt-4o-2024-08-06",
  "output": [
    {
      "type": "message",
      "id": "msg_67ccd3acc8d48190a77525dc6de64b4104becb25c7f5aa5b",
      "status": "completed",
      "role": "assistant",
      "content": [
        {
          "type": "output_text",
          "text": "The image depicts a scenic landscape with a wooden boardwalk or pathway leading through lush, green grass under a blue sky with some clouds.",
          "annotations": []
        }
      ]
    }
  ],
  "parallel_tool_calls": true,
  "previous_response_id": null,
  "reasoning": {"effort": null, "summary": null},
  "store": true,
  "temperature": 1,
  "text": {"format": {"type": "text"}},
  "tool_choice": "auto",
  "tools": [],
  "top_p": 1,
  "truncation": "disabled",
  "usage": {
    "input_tokens": 328,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens": 52,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 380
  },
  "user": null,
  "metadata": {}
}`,
			want:   Usage{Model: "gpt-4o-2024-08-06", InputTokens: 328, OutputTokens: 52, TotalTokens: 380},
			system: SystemOpenAI,
		},
		{
			// https://docs.anthropic.com/en/api/messages (response example)
			name: "Anthropic message",
			body: `{
  "content": [
    {
      "text": "Hi! My name is Claude.",
      "type": "text"
    }
  ],
  "id": "msg_013Zva2CMHLNnXjNJJKqJ2EF",
  "model": "claude-3-7-sonnet-20250219",
  "role": "assistant",
  "stop_reason": "end_turn",
  "stop_sequence": null,
  "type": "message",
  "usage": {
    "input_tokens": 2095,
    "output_tokens": 503
  }
}`,
			want:   Usage{Model: "claude-3-7-sonnet-20250219", InputTokens: 2095, OutputTokens: 503, TotalTokens: 2598},
			system: SystemAnthropic,
		},
		{
			// https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching
			// (usage fields of a cached request; input_tokens counts the
			// tokens after the last cache breakpoint only)
			name: "Anthropic message, cache read and creation",
			body: `{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-20250514",
  "content":[{"type":"text","text":"..."}],"stop_reason":"end_turn","stop_sequence":null,
  "usage": {
    "input_tokens": 50,
    "cache_creation_input_tokens": 248,
    "cache_read_input_tokens": 1800,
    "output_tokens": 503
  }
}`,
			want:   Usage{Model: "claude-sonnet-4-20250514", InputTokens: 2098, OutputTokens: 503, CachedTokens: 1800, TotalTokens: 2601},
			system: SystemAnthropic,
		},
		{
			// https://ai.google.dev/gemini-api/docs/text-generation (REST
			// response of models/gemini-2.0-flash:generateContent)
			name: "Gemini generateContent",
			body: `{
  "candidates": [
    {
      "content": {
        "parts": [
          {
            "text": "AI learns patterns from data to make predictions or decisions.\n"
          }
        ],
        "role": "model"
      },
      "finishReason": "STOP",
      "avgLogprobs": -0.14139835039774576
    }
  ],
  "usageMetadata": {
    "promptTokenCount": 8,
    "candidatesTokenCount": 12,
    "totalTokenCount": 20,
    "promptTokensDetails": [
      {
        "modality": "TEXT",
        "tokenCount": 8
      }
    ],
    "candidatesTokensDetails": [
      {
        "modality": "TEXT",
        "tokenCount": 12
      }
    ]
  },
  "modelVersion": "gemini-2.0-flash"
}`,
			want:   Usage{Model: "gemini-2.0-flash", InputTokens: 8, OutputTokens: 12, TotalTokens: 20},
			system: SystemGemini,
		},
		{
			// https://ai.google.dev/api/generate-content#UsageMetadata and
			// https://ai.google.dev/gemini-api/docs/caching (a cached,
			// thinking model's usageMetadata: thoughts are billed as output)
			name: "Gemini, cached content and thoughts",
			body: `{"candidates":[{"content":{"parts":[{"text":"..."}],"role":"model"},"finishReason":"STOP","index":0}],
  "usageMetadata": {
    "promptTokenCount": 696190,
    "cachedContentTokenCount": 696175,
    "candidatesTokenCount": 214,
    "thoughtsTokenCount": 1051,
    "totalTokenCount": 697455
  },
  "modelVersion": "gemini-2.5-flash"
}`,
			want:   Usage{Model: "gemini-2.5-flash", InputTokens: 696190, OutputTokens: 1265, CachedTokens: 696175, TotalTokens: 697455},
			system: SystemGemini,
		},
		{
			// Constructed (no captured body with tool use was found): the
			// counts' meaning is googleapis/python-genai@66807187
			// google/genai/types.py GenerateContentResponseUsageMetadata:
			// toolUsePromptTokenCount is "the results from tool executions,
			// which are provided back to the model as input", and
			// totalTokenCount "is the sum of prompt_token_count,
			// candidates_token_count, tool_use_prompt_token_count, and
			// thoughts_token_count" (here 74 + 155 + 103 + 293 = 625).
			name: "Gemini, tool-use prompt",
			body: `{"candidates":[{"content":{"parts":[{"text":"..."}],"role":"model"},"finishReason":"STOP","index":0}],
  "usageMetadata": {
    "promptTokenCount": 74,
    "candidatesTokenCount": 103,
    "totalTokenCount": 625,
    "toolUsePromptTokenCount": 155,
    "thoughtsTokenCount": 293
  },
  "modelVersion": "gemini-2.5-flash"
}`,
			want:   Usage{Model: "gemini-2.5-flash", InputTokens: 229, OutputTokens: 396, TotalTokens: 625},
			system: SystemGemini,
		},
		{
			// https://docs.aws.amazon.com/bedrock/latest/userguide/conversation-inference-call.html
			// (Converse response)
			name: "Bedrock Converse",
			body: `{
  "output": {
    "message": {
      "role": "assistant",
      "content": [
        {
          "text": "Here is a list of 3 pop songs by artists from the United Kingdom:\n\n1. \"Wannabe\" by Spice Girls\n2. \"Bitter Sweet Symphony\" by The Verve\n3. \"Don't Look Back in Anger\" by Oasis"
        }
      ]
    }
  },
  "stopReason": "end_turn",
  "usage": {
    "inputTokens": 125,
    "outputTokens": 60,
    "totalTokens": 185
  },
  "metrics": {
    "latencyMs": 1175
  }
}`,
			want:   Usage{InputTokens: 125, OutputTokens: 60, TotalTokens: 185},
			system: SystemBedrock,
		},
		{
			// https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_TokenUsage.html
			// and https://docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html
			// (cache reads and writes come besides inputTokens)
			name: "Bedrock Converse, prompt cache",
			body: `{"output":{"message":{"role":"assistant","content":[{"text":"..."}]}},"stopReason":"end_turn",
  "usage": {"inputTokens": 15, "outputTokens": 240, "totalTokens": 4336, "cacheReadInputTokens": 0, "cacheWriteInputTokens": 4081},
  "metrics": {"latencyMs": 4528}}`,
			want:   Usage{InputTokens: 4096, OutputTokens: 240, TotalTokens: 4336},
			system: SystemBedrock,
		},
		{name: "no usage", body: `{"ok":true}`},
		{name: "not an object", body: `"text"`},
		{name: "garbage", body: `{"usage":"lots"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			u, system := Parse([]byte(tc.body))
			require.Equal(t, tc.want, u)
			require.Equal(t, tc.system, system)
		})
	}
}

// TestObject reads an exec agent's ActionResponse usage, as the agent
// helpers (clients/python, clients/typescript) write it.
func TestObject(t *testing.T) {
	t.Parallel()
	cases := []struct {
		raw  string
		want Usage
	}{
		{`812`, Usage{TotalTokens: 812}},
		{`-4`, Usage{}},
		{`{"input_tokens":812,"output_tokens":40}`, Usage{InputTokens: 812, OutputTokens: 40, TotalTokens: 852}},
		{`{"total_tokens":90,"input_tokens":1}`, Usage{InputTokens: 1, TotalTokens: 90}},
		{`{"input_tokens":100,"output_tokens":5,"cached_tokens":60,"model":"gpt-4o-mini"}`,
			Usage{Model: "gpt-4o-mini", InputTokens: 100, OutputTokens: 5, CachedTokens: 60, TotalTokens: 105}},
		{`{"prompt_tokens":7,"completion_tokens":3}`, Usage{InputTokens: 7, OutputTokens: 3, TotalTokens: 10}},
		{`[1]`, Usage{}},
		{``, Usage{}},
	}
	for _, tc := range cases {
		u, _ := Object([]byte(tc.raw))
		require.Equal(t, tc.want, u, tc.raw)
	}
}

func TestModelOf(t *testing.T) {
	t.Parallel()
	require.Equal(t, "gpt-4o", ModelOf([]byte(`{"model":"gpt-4o","messages":[]}`)))
	require.Equal(t, "anthropic.claude-3-haiku-20240307-v1:0", ModelOf([]byte(`{"modelId":"anthropic.claude-3-haiku-20240307-v1:0"}`)))
	require.Empty(t, ModelOf([]byte(`[1]`)))
	require.Empty(t, ModelOf(nil))
}

// TestPrice: cost = (input − cached)·input + cached·cached_input (input's
// price when unset) + output·output, per million; a dated model name takes
// its undated price; a model without a price stays unpriced.
func TestPrice(t *testing.T) {
	t.Parallel()
	cachedPrice := 1.25
	ps := Prices{
		"gpt-4o":           {InputPerMTok: 2.5, OutputPerMTok: 10, CachedInputPerMTok: &cachedPrice},
		"gpt-4o-mini":      {InputPerMTok: 0.15, OutputPerMTok: 0.6},
		"claude-3-5-haiku": {InputPerMTok: 0.8, OutputPerMTok: 4},
	}
	u := ps.Price(Usage{Model: "gpt-4o", InputTokens: 2006, OutputTokens: 300, CachedTokens: 1920, TotalTokens: 2306})
	require.True(t, u.Priced)
	require.InDelta(t, (86*2.5+1920*1.25+300*10)/1e6, u.CostUSD, 1e-15)

	u = ps.Price(Usage{Model: "gpt-4o-mini", InputTokens: 1000, OutputTokens: 1000, CachedTokens: 500, TotalTokens: 2000})
	require.InDelta(t, (1000*0.15+1000*0.6)/1e6, u.CostUSD, 1e-15, "cached tokens at the input price when cached_input is unset")

	name, _, ok := ps.Match("gpt-4o-2024-08-06")
	require.True(t, ok)
	require.Equal(t, "gpt-4o", name)
	name, _, ok = ps.Match("gpt-4o-mini-2024-07-18")
	require.True(t, ok)
	require.Equal(t, "gpt-4o-mini", name, "the longest dated match is the exact base name")
	name, _, ok = ps.Match("claude-3-5-haiku-20241022")
	require.True(t, ok)
	require.Equal(t, "claude-3-5-haiku", name)
	_, _, ok = ps.Match("gpt-4o-audio-preview")
	require.False(t, ok, "only a date or version suffix is dropped")
	_, _, ok = ps.Match("")
	require.False(t, ok)

	u = ps.Price(Usage{Model: "llama-3", InputTokens: 10, TotalTokens: 10})
	require.False(t, u.Priced)
	require.Zero(t, u.CostUSD)

	free := 0.0
	require.NoError(t, Price{InputPerMTok: 1, CachedInputPerMTok: &free}.Validate())
	require.ErrorContains(t, Price{OutputPerMTok: -1}.Validate(), "output_per_mtok")
}

func TestAdd(t *testing.T) {
	t.Parallel()
	a := Usage{Model: "m", InputTokens: 1, OutputTokens: 2, TotalTokens: 3, CostUSD: 0.5, Priced: true}
	require.Equal(t, a, Usage{}.Add(a))
	s := a.Add(Usage{Model: "m", InputTokens: 1, TotalTokens: 1})
	require.Equal(t, Usage{Model: "m", InputTokens: 2, OutputTokens: 2, TotalTokens: 4, CostUSD: 0.5, Priced: true}, s)
	require.Empty(t, s.Add(Usage{Model: "n", InputTokens: 1}).Model)
}
