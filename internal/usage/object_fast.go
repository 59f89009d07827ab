package usage

import "github.com/agentq/agentq/internal/jsonscan"

// usageKeys are usageObject's JSON keys: the model, the numbers
// (setNumber's indexes), the details objects.
var usageKeys = []string{
	"model", "prompt_tokens", "completion_tokens", "input_tokens", "output_tokens", "total_tokens",
	"cache_read_input_tokens", "cache_creation_input_tokens", "cached_tokens", "inputTokens", "outputTokens",
	"totalTokens", "cacheReadInputTokens", "cacheWriteInputTokens", "prompt_tokens_details", "input_tokens_details",
}

// Indexes in usageKeys of the keys that are not plain numbers.
const (
	keyModel         = 0
	keyPromptDetails = 14
	keyInputDetails  = 15
)

// detailsKeys are the keys of a details object (prompt_tokens_details,
// input_tokens_details).
var detailsKeys = []string{"cached_tokens"}

// plainObject decodes the usage object raw into o as json.Unmarshal
// does, when it is plain: valid JSON, each key plainly one of o's or
// another (keyIndex) and there once, the model a plain string, the
// details objects of numbers, every other value of o's keys a number in
// range. false: it is not (o is then undefined; json.Unmarshal decides).
func (o *usageObject) plainObject(raw []byte) bool {
	if !jsonscan.Valid(raw) {
		return false
	}
	seen := make([]bool, len(usageKeys))
	return members(raw, func(key, val []byte) bool {
		k, plain := keyIndex(key, usageKeys)
		if !plain || (k >= 0 && seen[k]) {
			return false
		}
		var ok bool
		switch {
		case k < 0:
			return true
		case k == keyModel:
			o.Model, ok = plainString(val)
		case k == keyPromptDetails:
			ok = plainDetails(val, &o.PromptDetails.Cached)
		case k == keyInputDetails:
			o.InputDetails = &struct {
				Cached float64 `json:"cached_tokens"`
			}{}
			ok = plainDetails(val, &o.InputDetails.Cached)
		default:
			var f float64
			if f, ok = plainNumber(val); ok {
				o.setNumber(k, f)
			}
		}
		seen[k] = true
		return ok
	})
}

// setNumber sets o's number field of key usageKeys[k] to f as
// json.Unmarshal does (a pointer field to a new float).
func (o *usageObject) setNumber(k int, f float64) {
	switch k {
	case 1:
		o.Prompt = &f
	case 2:
		o.Completion = f
	case 3:
		o.Input = f
	case 4:
		o.Output = f
	case 5:
		o.Total = f
	case 6:
		o.CacheRead = &f
	case 7:
		o.CacheWrite = &f
	case 8:
		o.Cached = f
	case 9:
		o.InputTokens = &f
	case 10:
		o.OutputTokens = f
	case 11:
		o.TotalTokens = f
	case 12:
		o.CacheReadTokens = f
	case 13:
		o.CacheWriteTokens = f
	}
}

// plainDetails reads a plain details object's cached_tokens into cached.
func plainDetails(val []byte, cached *float64) bool {
	seen := false
	return members(val, func(key, v []byte) bool {
		k, plain := keyIndex(key, detailsKeys)
		if !plain || (k == 0 && seen) {
			return false
		}
		if k < 0 {
			return true
		}
		seen = true
		f, ok := plainNumber(v)
		*cached = f
		return ok
	})
}
