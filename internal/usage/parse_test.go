package usage

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestParse reads the usage of the providers' reply bodies: recorded replies
// and the API references' examples, each case naming its source and saying
// when it is constructed instead (checked 2026-08 against stored copies of
// the sources, not the live pages).
func TestParse(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, body string
		want       Usage
		system     string
	}{
		{
			// Verbatim: openai/openai-openapi@f85dbe22 openapi.yaml, schema
			// CreateChatCompletionResponse, x-oaiMeta example (the API
			// reference's "The chat completion object",
			// https://platform.openai.com/docs/api-reference/chat/object).
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
			// The usage object of OpenAI's prompt-caching guide
			// (https://platform.openai.com/docs/guides/prompt-caching), as
			// quoted in BerriAI/litellm's prompt-caching tests; the object and
			// model around it are added. cached_tokens is a part of
			// prompt_tokens (openai-openapi CompletionUsage:
			// prompt_tokens_details.cached_tokens "Cached tokens present in
			// the prompt"), and total_tokens = prompt + completion.
			name: "OpenAI chat completion, cached prompt",
			body: `{"object":"chat.completion","model":"gpt-4o","usage": {
  "prompt_tokens": 2006,
  "completion_tokens": 300,
  "total_tokens": 2306,
  "prompt_tokens_details": {
    "cached_tokens": 1920
  },
  "completion_tokens_details": {
    "reasoning_tokens": 0
  }
}}`,
			want:   Usage{Model: "gpt-4o", InputTokens: 2006, OutputTokens: 300, CachedTokens: 1920, TotalTokens: 2306},
			system: SystemOpenAI,
		},
		{
			// Verbatim (YAML as JSON): openai/openai-openapi@f85dbe22
			// openapi.yaml, schema Response, example (the API reference's
			// "The response object",
			// https://platform.openai.com/docs/api-reference/responses/object).
			name: "OpenAI Responses",
			body: `{
  "id": "resp_67ccd3a9da748190baa7f1570fe91ac604becb25c45c1d41",
  "object": "response",
  "created_at": 1741476777,
  "status": "completed",
  "completed_at": 1741476778,
  "error": null,
  "incomplete_details": null,
  "instructions": null,
  "max_output_tokens": null,
  "model": "gpt-4o-2024-08-06",
  "output": [
    {
      "type": "message",
      "id": "msg_67ccd3acc8d48190a77525dc6de64b4104becb25c45c1d41",
      "status": "completed",
      "role": "assistant",
      "content": [
        {
          "type": "output_text",
          "text": "The image depicts a scenic landscape with a wooden boardwalk or pathway leading through lush, green grass under a blue sky with some clouds. The setting suggests a peaceful natural area, possibly a park or nature reserve. There are trees and shrubs in the background.",
          "annotations": []
        }
      ]
    }
  ],
  "parallel_tool_calls": true,
  "previous_response_id": null,
  "reasoning": {
    "effort": null,
    "summary": null,
    "context": null
  },
  "store": true,
  "temperature": 1,
  "text": {
    "format": {
      "type": "text"
    }
  },
  "tool_choice": "auto",
  "tools": [],
  "top_p": 1,
  "truncation": "disabled",
  "usage": {
    "input_tokens": 328,
    "input_tokens_details": {
      "cached_tokens": 0,
      "cache_write_tokens": 0
    },
    "output_tokens": 52,
    "output_tokens_details": {
      "reasoning_tokens": 0
    },
    "total_tokens": 380
  },
  "user": null,
  "metadata": {}
}`,
			want:   Usage{Model: "gpt-4o-2024-08-06", InputTokens: 328, OutputTokens: 52, TotalTokens: 380},
			system: SystemOpenAI,
		},
		{
			// A recorded API reply: anthropics/anthropic-sdk-python@009b0353
			// tests/lib/_parse/__inline_snapshot__/test_messages/TestSyncParse/
			// c11eefc7-fff0-4466-8453-42eef73b8876.json (response body of POST
			// https://api.anthropic.com/v1/messages). The cache_creation object
			// (by TTL) is not cache_creation_input_tokens and is not read.
			name: "Anthropic message",
			body: `{
  "model": "claude-sonnet-4-5-20250929",
  "id": "msg_01Egs18hRzhru3uGon3qesbA",
  "type": "message",
  "role": "assistant",
  "content": [
    {
      "type": "text",
      "text": "{\"product_name\": \"Green Tea\", \"price\": 5.50, \"quantity\": 2}"
    }
  ],
  "stop_reason": "end_turn",
  "stop_sequence": null,
  "usage": {
    "input_tokens": 249,
    "cache_creation_input_tokens": 0,
    "cache_read_input_tokens": 0,
    "cache_creation": {
      "ephemeral_5m_input_tokens": 0,
      "ephemeral_1h_input_tokens": 0
    },
    "output_tokens": 26,
    "service_tier": "standard",
    "inference_geo": "not_available"
  }
}`,
			want:   Usage{Model: "claude-sonnet-4-5-20250929", InputTokens: 249, OutputTokens: 26, TotalTokens: 275},
			system: SystemAnthropic,
		},
		{
			// The usage block of one Sonnet 4.6 reply as
			// https://tokenmiser.uk/blog/prompt-caching-basics/ shows it; the
			// message around it is added. input_tokens leaves the cache out:
			// anthropic-sdk-python src/anthropic/types/usage.py reads
			// cache_read_input_tokens "read from the cache" and
			// cache_creation_input_tokens "used to create the cache entry"
			// beside input_tokens, and Anthropic's prompt-caching guide
			// (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching)
			// sums the three for the whole prompt.
			name: "Anthropic message, cache read and creation",
			body: `{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-6",
  "content":[{"type":"text","text":"..."}],"stop_reason":"end_turn","stop_sequence":null,
  "usage": {
    "input_tokens": 1,
    "output_tokens": 67,
    "cache_creation_input_tokens": 287,
    "cache_read_input_tokens": 30433
  }
}`,
			want:   Usage{Model: "claude-sonnet-4-6", InputTokens: 30721, OutputTokens: 67, CachedTokens: 30433, TotalTokens: 30788},
			system: SystemAnthropic,
		},
		{
			// The REST quickstart's call ("Explain how AI works in a few
			// words" to models/gemini-2.0-flash:generateContent,
			// https://ai.google.dev/gemini-api/docs/quickstart): replies to it
			// captured in several public repositories agree on this body and
			// usageMetadata (only avgLogprobs differs from call to call).
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
			// A REST reply of a thinking model, from Firebase AI Logic's
			// server prompt templates guide
			// (https://firebase.google.com/docs/ai-logic/server-prompt-templates/get-started);
			// the candidate's long text is cut to "...". totalTokenCount =
			// 34 + 418 + 438: thoughts are outside candidatesTokenCount and
			// billed as output.
			name: "Gemini, thinking",
			body: `{
  "candidates": [{
    "content": {
      "parts": [{
        "text": "..."
      }],
      "role": "model"
    },
    "finishReason": "STOP",
    "index": 0
  }],
  "usageMetadata": {
    "promptTokenCount": 34,
    "candidatesTokenCount": 418,
    "totalTokenCount": 890,
    "promptTokensDetails": [{
      "modality": "TEXT",
      "tokenCount": 34
    }],
    "thoughtsTokenCount": 438
  },
  "modelVersion": "gemini-3-flash-preview",
  "responseId": "3w4Vad6yF-y1vdIP_q_zgAw"
}`,
			want:   Usage{Model: "gemini-3-flash-preview", InputTokens: 34, OutputTokens: 856, TotalTokens: 890},
			system: SystemGemini,
		},
		{
			// Constructed (no captured reply with cached content was found):
			// googleapis/python-genai@66807187 google/genai/types.py says
			// prompt_token_count "also includes the number of tokens in the
			// cached content" and cached_content_token_count is "the number of
			// tokens in the cached content that was used for this request",
			// so cached is a part of input, as OpenAI's.
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
			// Verbatim: the Converse response example of
			// https://docs.aws.amazon.com/bedrock/latest/userguide/conversation-inference-call.html
			// (awsdocs' Bedrock user guide source). The reply names no model
			// (botocore bedrock-runtime 2023-09-30 service-2.json:
			// ConverseResponse is output, stopReason, usage, metrics,
			// additionalModelResponseFields, trace, performanceConfig,
			// serviceTier): the worker takes it from the params (ModelOf).
			name: "Bedrock Converse",
			body: `{
  "output": {
    "message": {
      "role": "assistant",
      "content": [
        {
          "text": "Here is a list of 3 pop songs by artists from the United Kingdom:\n\n1. \"Wannabe\" by Spice Girls\n2. \"Bitter Sweet Symphony\" by The Verve \n3. \"Don't Look Back in Anger\" by Oasis"
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
			// Constructed (no captured reply with a cache was found). Fields:
			// botocore bedrock-runtime service-2.json TokenUsage (inputTokens,
			// outputTokens, totalTokens, cacheReadInputTokens,
			// cacheWriteInputTokens, cacheDetails). inputTokens leaves the
			// cache out and totalTokens counts it, per AWS's prompt-caching
			// guide (https://docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html:
			// "total input tokens = inputTokens + cacheReadInputTokens +
			// cacheWriteInputTokens", as quoted in crmne/ruby_llm#832; the same
			// reading in BerriAI/litellm#15292, maximhq/bifrost#1872).
			name: "Bedrock Converse, prompt cache",
			body: `{"output":{"message":{"role":"assistant","content":[{"text":"..."}]}},"stopReason":"end_turn",
  "usage": {"inputTokens": 15, "outputTokens": 240, "totalTokens": 4336, "cacheReadInputTokens": 0, "cacheWriteInputTokens": 4081},
  "metrics": {"latencyMs": 4528}}`,
			want:   Usage{InputTokens: 4096, OutputTokens: 240, TotalTokens: 4336},
			system: SystemBedrock,
		},
		{
			// The same prompt again, read from the cache (constructed, as
			// above): cached is the cache reads, a part of input.
			name: "Bedrock Converse, prompt cache read",
			body: `{"output":{"message":{"role":"assistant","content":[{"text":"..."}]}},"stopReason":"end_turn",
  "usage": {"inputTokens": 15, "outputTokens": 240, "totalTokens": 4336, "cacheReadInputTokens": 4081, "cacheWriteInputTokens": 0},
  "metrics": {"latencyMs": 1502}}`,
			want:   Usage{InputTokens: 4096, OutputTokens: 240, CachedTokens: 4081, TotalTokens: 4336},
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
		// A Responses-shaped usage object with cached and reasoning tokens,
		// verbatim: openai/openai-openapi@f85dbe22 openapi.yaml, the Batch
		// object's example usage (reasoning_tokens are a part of
		// output_tokens, cached_tokens of input_tokens).
		{`{
  "input_tokens": 1500,
  "input_tokens_details": {
    "cached_tokens": 1024
  },
  "output_tokens": 500,
  "output_tokens_details": {
    "reasoning_tokens": 300
  },
  "total_tokens": 2000
}`, Usage{InputTokens: 1500, OutputTokens: 500, CachedTokens: 1024, TotalTokens: 2000}},
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
