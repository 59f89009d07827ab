package jsonscan

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// validCases are inputs at every edge of the grammar, valid or not.
var validCases = []string{
	``, ` `, `1`, ` 1 `, `-`, `-0`, `01`, `-01`, `0.`, `0.5`, `.5`, `1e`, `1e+`, `1E-3`, `1e5.`, `12.5e3`, `1 2`,
	`"`, `""`, `"a`, `"\"`, `"\\"`, `"\/\b\f\n\r\t"`, `"\x"`, `"\u12"`, `"\u12g4"`, `"\u00e9"`, `"\uABCD"`, "\"\x01\"",
	"\"\x7f\"", "\"\xff\xfe\"", "\"tab\there\"", `true`, `tru`, `truex`, `false`, `null`, `nul`, `NULL`,
	`{}`, `{ }`, `{`, `}`, `{"a"}`, `{"a":}`, `{"a":1}`, `{"a":1,}`, `{"a":1 "b":2}`, `{,"a":1}`, `{1:2}`,
	`{"a":1,"b":[1,2,{"c":null}]}`, `[]`, `[ ]`, `[`, `]`, `[1,]`, `[,1]`, `[1 2]`, `[1,[2,[3]]]`, `[}`, `{]`,
	`[1]]`, `{"a":{}}}`, `{"a" : [ true , false ] }`, " \t\r\n[1]\n", "\v1", "[1]\x00",
}

func TestValid(t *testing.T) {
	t.Parallel()
	for _, in := range validCases {
		require.Equal(t, json.Valid([]byte(in)), Valid([]byte(in)), "%q", in)
	}
	for _, depth := range []int{MaxDepth - 1, MaxDepth, MaxDepth + 1} {
		for _, open := range []string{"[", `{"a":`} {
			closing := map[string]string{"[": "]", `{"a":`: "}"}[open]
			in := []byte(strings.Repeat(open, depth) + "1" + strings.Repeat(closing, depth))
			require.Equal(t, json.Valid(in), Valid(in), "depth %d of %s", depth, open)
			require.Equal(t, depth <= MaxDepth, Valid(in), "depth %d of %s", depth, open)
		}
	}
}

// FuzzValid holds Valid to encoding/json.Valid's answer.
func FuzzValid(f *testing.F) {
	for _, in := range validCases {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if Valid(b) != json.Valid(b) {
			t.Fatalf("Valid(%q) = %v, json.Valid says %v", b, Valid(b), json.Valid(b))
		}
	})
}

// BenchmarkValid checks a 4 KiB LLM reply, beside encoding/json.Valid.
func BenchmarkValid(b *testing.B) {
	reply, err := json.Marshal(map[string]any{"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o",
		"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant",
			"content": strings.Repeat("The quick brown fox jumps over the lazy dog. ", 90)}}},
		"usage": map[string]any{"prompt_tokens": 1200, "completion_tokens": 800, "total_tokens": 2000}})
	require.NoError(b, err)
	b.SetBytes(int64(len(reply)))
	b.Run("jsonscan", func(b *testing.B) {
		for b.Loop() {
			if !Valid(reply) {
				b.Fatal("invalid")
			}
		}
	})
	b.Run("encoding_json", func(b *testing.B) {
		for b.Loop() {
			if !json.Valid(reply) {
				b.Fatal("invalid")
			}
		}
	})
}
