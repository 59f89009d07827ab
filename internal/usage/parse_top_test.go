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
