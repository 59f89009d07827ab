package usage

import (
	"bytes"
	"encoding/json"
)

// Systems a reply's shape names (the OpenTelemetry GenAI semantic
// conventions' gen_ai.system values); "" when the shape does not tell.
const (
	SystemOpenAI    = "openai"
	SystemAnthropic = "anthropic"
	SystemGemini    = "gcp.gemini"
	SystemBedrock   = "aws.bedrock"
)

// usageKey is what every shape Parse reads has in its body.
var usageKey = []byte(`"usage`)

// Parse reads the usage of a provider's reply body (or of an assembled
// stream, which has the non-streaming body's shape) and the system its
// shape names. It reads:
//   - OpenAI chat completions: usage.prompt_tokens, completion_tokens,
//     total_tokens, prompt_tokens_details.cached_tokens; model.
//   - OpenAI Responses: usage.input_tokens, output_tokens, total_tokens,
//     input_tokens_details.cached_tokens; model.
//   - Anthropic messages: usage.input_tokens, output_tokens,
//     cache_read_input_tokens, cache_creation_input_tokens; model. Anthropic's
//     input_tokens leaves out the cache's tokens: InputTokens is
//     input_tokens + cache_read_input_tokens + cache_creation_input_tokens
//     (all the prompt), CachedTokens the cache reads (cache writes are
//     priced as input).
//   - Gemini: usageMetadata.promptTokenCount (cached content included) +
//     toolUsePromptTokenCount (tool results fed back to the model: input),
//     candidatesTokenCount + thoughtsTokenCount (output: thinking is billed
//     as output), totalTokenCount (the sum of those four),
//     cachedContentTokenCount; modelVersion.
//   - Bedrock Converse: usage.inputTokens, outputTokens, totalTokens,
//     cacheReadInputTokens, cacheWriteInputTokens (counted like
//     Anthropic's); no model in the body.
//
// TotalTokens is the reply's total when it says one at least input +
// output, else input + output. Every count is clamped to MaxTokens
// (Clamp). A body with none of these is no usage (IsZero).
func Parse(body []byte) (u Usage, system string) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' || !bytes.Contains(body, usageKey) {
		// No "usage" or "usageMetadata" key: no usage, and no decode (a
		// reply that reports none costs a scan, not a parse).
		return Usage{}, ""
	}
	var r replyTop
	if r.decode(body) != nil {
		return Usage{}, ""
	}
	if r.UsageMetadata != nil {
		u = r.UsageMetadata.usage()
		u.Model = r.ModelVersion
		return u, SystemGemini
	}
	u, system = Object(r.Usage)
	if u.IsZero() {
		return Usage{}, ""
	}
	u.Model = r.Model
	switch {
	case r.Type == "message" && system == "":
		system = SystemAnthropic
	case r.Object == "response" || r.Object == "chat.completion":
		system = SystemOpenAI
	}
	return u, system
}

// Object reads a usage object by itself (a reply's "usage", an exec
// agent's ActionResponse "usage"): any of Parse's shapes, or a bare number
// (total tokens). A "model" in the object names the model.
func Object(raw json.RawMessage) (u Usage, system string) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return Usage{}, ""
	}
	if raw[0] != '{' { // a bare number, or no usage
		var n float64
		if json.Unmarshal(raw, &n) == nil {
			return Usage{TotalTokens: tokens(n)}, ""
		}
		return Usage{}, ""
	}
	var o usageObject
	if !o.plainObject(raw) {
		if o = (usageObject{}); json.Unmarshal(raw, &o) != nil {
			return Usage{}, ""
		}
	}
	return o.usage()
}

// usageObject is every key a usage object may have, whatever its shape.
type usageObject struct {
	Model string `json:"model"`
	// OpenAI chat completions.
	Prompt        *float64 `json:"prompt_tokens"`
	Completion    float64  `json:"completion_tokens"`
	PromptDetails struct {
		Cached float64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	// OpenAI Responses and Anthropic (and agentq's own: cached_tokens).
	Input        float64 `json:"input_tokens"`
	Output       float64 `json:"output_tokens"`
	Total        float64 `json:"total_tokens"`
	InputDetails *struct {
		Cached float64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	CacheRead  *float64 `json:"cache_read_input_tokens"`
	CacheWrite *float64 `json:"cache_creation_input_tokens"`
	Cached     float64  `json:"cached_tokens"`
	// Bedrock Converse.
	InputTokens      *float64 `json:"inputTokens"`
	OutputTokens     float64  `json:"outputTokens"`
	TotalTokens      float64  `json:"totalTokens"`
	CacheReadTokens  float64  `json:"cacheReadInputTokens"`
	CacheWriteTokens float64  `json:"cacheWriteInputTokens"`
}

func (o usageObject) usage() (Usage, string) {
	var in, out, cached, total float64
	system := ""
	switch {
	case o.Prompt != nil:
		in, out, cached, total = *o.Prompt, o.Completion, o.PromptDetails.Cached, o.Total
		system = SystemOpenAI
	case o.InputTokens != nil:
		in = *o.InputTokens + o.CacheReadTokens + o.CacheWriteTokens
		out, cached, total = o.OutputTokens, o.CacheReadTokens, o.TotalTokens
		system = SystemBedrock
	case o.CacheRead != nil || o.CacheWrite != nil:
		in, out, total = o.Input, o.Output, o.Total
		if o.CacheRead != nil {
			in, cached = in+*o.CacheRead, *o.CacheRead
		}
		if o.CacheWrite != nil {
			in += *o.CacheWrite
		}
		system = SystemAnthropic
	default:
		in, out, cached, total = o.Input, o.Output, o.Cached, o.Total
		if o.InputDetails != nil {
			cached = o.InputDetails.Cached
			system = SystemOpenAI
		}
	}
	u := Usage{Model: o.Model, InputTokens: tokens(in), OutputTokens: tokens(out), CachedTokens: tokens(cached), TotalTokens: tokens(total)}
	return u.Clamp(), system
}

// geminiUsage is Gemini's usageMetadata.
type geminiUsage struct {
	Prompt     float64 `json:"promptTokenCount"`
	ToolUse    float64 `json:"toolUsePromptTokenCount"`
	Candidates float64 `json:"candidatesTokenCount"`
	Thoughts   float64 `json:"thoughtsTokenCount"`
	Total      float64 `json:"totalTokenCount"`
	Cached     float64 `json:"cachedContentTokenCount"`
}

func (g geminiUsage) usage() Usage {
	u := Usage{InputTokens: tokens(g.Prompt + g.ToolUse), OutputTokens: tokens(g.Candidates + g.Thoughts),
		CachedTokens: tokens(g.Cached), TotalTokens: tokens(g.Total)}
	return u.Clamp()
}

// tokens is a count as the reply says it, within [0, MaxTokens]: clamped
// as a float, before any conversion or arithmetic (a float ≥ 2^63 has no
// int64 value).
func tokens(f float64) int64 { return clampCount(f) }

// ModelOf returns the model a request's params name ("model", or
// Bedrock's "modelId"), "" when they name none: the model of a reply that
// does not say (Bedrock's).
func ModelOf(params []byte) string {
	params = bytes.TrimSpace(params)
	if len(params) == 0 || params[0] != '{' {
		return ""
	}
	var p struct {
		Model   string `json:"model"`
		ModelID string `json:"modelId"`
	}
	if json.Unmarshal(params, &p) != nil {
		return ""
	}
	if p.Model != "" {
		return p.Model
	}
	return p.ModelID
}
