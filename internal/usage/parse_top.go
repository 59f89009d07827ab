package usage

import (
	"bytes"
	"encoding/json"

	"github.com/agentq/agentq/internal/jsonscan"
)

// replyTop is what Parse reads of a reply: a few of its top-level keys.
type replyTop struct {
	Model         string          `json:"model"`
	ModelVersion  string          `json:"modelVersion"`
	Object        string          `json:"object"`
	Type          string          `json:"type"`
	Usage         json.RawMessage `json:"usage"`
	UsageMetadata *geminiUsage    `json:"usageMetadata"`
}

// topKeys are replyTop's JSON keys.
var topKeys = [...]string{"model", "modelVersion", "object", "type", "usage", "usageMetadata"}

// decode is json.Unmarshal(body, r): the same result and the same error or
// none. A reply is mostly what Parse does not read (an LLM's text): when
// body is valid JSON, decode picks replyTop's keys from its top level by
// their structure and has encoding/json decode only those (the reply's
// text is scanned, not decoded; its validity is checked by
// jsonscan.Valid); a key it cannot tell apart from theirs by bytes alone
// (an escape, another case, twice) leaves the whole body to
// encoding/json.
func (r *replyTop) decode(body []byte) error {
	if jsonscan.Valid(body) {
		if picked, ok := pickTop(body); ok {
			return json.Unmarshal(picked, r)
		}
	}
	return json.Unmarshal(body, r)
}

// pickTop returns the JSON object of valid JSON body's top-level keys
// that are topKeys, with their values as they are; ok is false when body
// is not an object or a key is not plainly one of them or another.
func pickTop(body []byte) (picked []byte, ok bool) {
	var vals [len(topKeys)][]byte
	i := jsonscan.SkipSpace(body, 0)
	if body[i] != '{' {
		return nil, false
	}
	for i = jsonscan.SkipSpace(body, i+1); body[i] != '}'; {
		end, _ := jsonscan.SkipString(body, i)
		key := body[i+1 : end-1]
		i = jsonscan.SkipSpace(body, jsonscan.SkipSpace(body, end)+1) // past the colon
		vend, _ := jsonscan.SkipValue(body, i)
		k, plain := topKey(key)
		if !plain || (k >= 0 && vals[k] != nil) {
			return nil, false
		}
		if k >= 0 {
			vals[k] = body[i:vend]
		}
		if i = jsonscan.SkipSpace(body, vend); body[i] == ',' {
			i = jsonscan.SkipSpace(body, i+1)
		}
	}
	picked = append(make([]byte, 0, 256), '{')
	for k, v := range vals {
		if v != nil {
			if len(picked) > 1 {
				picked = append(picked, ',')
			}
			picked = append(append(append(append(picked, '"'), topKeys[k]...), `":`...), v...)
		}
	}
	return append(picked, '}'), true
}

// topKey is key's index in topKeys (-1: another key); plain is false when
// encoding/json might match key to one of them while bytes do not (an
// escape, another case).
func topKey(key []byte) (k int, plain bool) {
	if bytes.IndexByte(key, '\\') >= 0 {
		return -1, false
	}
	for k, name := range topKeys {
		if string(key) == name {
			return k, true
		}
	}
	for _, name := range topKeys {
		if bytes.EqualFold(key, []byte(name)) { // encoding/json's own matching
			return -1, false
		}
	}
	return -1, true
}
