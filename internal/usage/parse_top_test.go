package usage

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzReplyTopDecode: replyTop.decode gives what json.Unmarshal gives, the
// same fields and an error exactly when it errs.
func FuzzReplyTopDecode(f *testing.F) {
	for _, s := range []string{
		`{"model":"gpt-4o","object":"chat.completion","choices":[{"message":{"content":"a \"}\" b"}}],"usage":{"total_tokens":3}}`,
		`{"type":"message","usage":{"input_tokens":1,"output_tokens":2},"model":"claude"}`,
		`{"modelVersion":"gemini","usageMetadata":{"promptTokenCount":4,"totalTokenCount":5}}`,
		`{"model":5,"usage":{}}`, `{"model":null,"usage":null,"usageMetadata":null}`, `{"Usage":{"total_tokens":1}}`,
		`{"model":"a","model":"b"}`, `{"mod\u0065l":"x"}`, `{"ſype":"message"}`, ` { } `, `[1]`, `{"usage":1,}`, `{"a":[1,{"b":"}"}],"usage":2}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var want, got replyTop
		werr := json.Unmarshal(body, &want)
		gerr := got.decode(body)
		require.Equal(t, werr == nil, gerr == nil, "%s: %v / %v", body, werr, gerr)
		if werr == nil {
			require.Equal(t, want, got, "%s", body)
		}
	})
}

// FuzzPlainObject: a usage object plainObject reads is read as
// json.Unmarshal reads it.
func FuzzPlainObject(f *testing.F) {
	for _, s := range []string{
		`{"prompt_tokens":25,"completion_tokens":180,"total_tokens":205}`,
		`{"prompt_tokens":1200,"completion_tokens":800,"total_tokens":2000,"prompt_tokens_details":{"cached_tokens":1024,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}`,
		`{"input_tokens":1,"output_tokens":2,"cache_read_input_tokens":3,"cache_creation_input_tokens":null}`,
		`{"inputTokens":1,"outputTokens":2,"totalTokens":3,"cacheReadInputTokens":4,"cacheWriteInputTokens":5}`,
		`{"input_tokens":5,"input_tokens_details":{"cached_tokens":2},"model":"gpt-4o"}`, `{"model":"a\"b"}`,
		`{"Prompt_tokens":1}`, `{"total_tokens":1,"total_tokens":2}`, `{"total_tokens":1e400}`, `{"total_tokens":"3"}`,
		`{"cached_tokens":-0.5e1}`, `{"prompt_tokens_details":5}`, ` {} `, `{"x":[1,{"y":"}"}]}`, `{"total_tokens":1`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var got usageObject
		if !got.plainObject(raw) {
			return
		}
		var want usageObject
		require.NoError(t, json.Unmarshal(raw, &want), "%s", raw)
		require.Equal(t, want, got, "%s", raw)
	})
}
