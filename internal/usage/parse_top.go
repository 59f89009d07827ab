package usage

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"

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
var topKeys = []string{"model", "modelVersion", "object", "type", "usage", "usageMetadata"}

// decode is json.Unmarshal(body, r): the same result and the same error or
// none. A reply is mostly what Parse does not read (an LLM's text): when
// body is valid JSON (jsonscan.Valid), decode picks replyTop's keys from
// its top level by their structure and reads their values itself when
// they are plain (strings without escapes, the usage as it is); others
// it has encoding/json decode alone (the reply's text is scanned, not
// decoded). A key it cannot tell apart from theirs by bytes alone (an
// escape, another case, twice) leaves the whole body to encoding/json.
func (r *replyTop) decode(body []byte) error {
	if jsonscan.Valid(body) {
		if vals, ok := pickTop(body); ok {
			if r.plain(vals) {
				return nil
			}
			return json.Unmarshal(joinTop(vals), r)
		}
	}
	return json.Unmarshal(body, r)
}

// pickTop returns the values of valid JSON body's top-level keys that
// are topKeys, by index (nil: absent); ok is false when body is not an
// object or a key is not plainly one of them or another.
func pickTop(body []byte) (vals [6][]byte, ok bool) {
	ok = members(body, func(key, val []byte) bool {
		k, plain := keyIndex(key, topKeys)
		if !plain || (k >= 0 && vals[k] != nil) {
			return false
		}
		if k >= 0 {
			vals[k] = val
		}
		return true
	})
	return vals, ok
}

// joinTop is the JSON object of pickTop's values.
func joinTop(vals [6][]byte) []byte {
	picked := append(make([]byte, 0, 256), '{')
	for k, v := range vals {
		if v != nil {
			if len(picked) > 1 {
				picked = append(picked, ',')
			}
			picked = append(append(append(append(picked, '"'), topKeys[k]...), `":`...), v...)
		}
	}
	return append(picked, '}')
}

// plain sets r from pickTop's values as json.Unmarshal would, when each is
// plain: a string without escapes for the names, the usage's value as it
// is, no usageMetadata, no null. false (r untouched): one is not.
func (r *replyTop) plain(vals [6][]byte) bool {
	var t replyTop
	for k, dst := range [...]*string{&t.Model, &t.ModelVersion, &t.Object, &t.Type} {
		if v := vals[k]; v != nil {
			s, ok := plainString(v)
			if !ok {
				return false
			}
			*dst = s
		}
	}
	if u := vals[4]; u != nil {
		if u[0] == 'n' {
			return false
		}
		t.Usage = append(json.RawMessage(nil), u...)
	}
	if vals[5] != nil {
		return false
	}
	*r = t
	return true
}

// plainString is the JSON string v (valid JSON) when it has no escape and
// is valid UTF-8 (encoding/json would replace an invalid byte).
func plainString(v []byte) (string, bool) {
	if v[0] != '"' || bytes.IndexByte(v, '\\') >= 0 || !utf8.Valid(v) {
		return "", false
	}
	return string(v[1 : len(v)-1]), true
}

// plainNumber is the JSON number v (valid JSON) as encoding/json reads it
// into a float64; false for another value or one out of range.
func plainNumber(v []byte) (float64, bool) {
	if v[0] != '-' && (v[0] < '0' || v[0] > '9') {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(v), 64)
	return f, err == nil
}

// members calls each for every key of the valid JSON object b, with its
// value, until each returns false; false when b is not an object or each
// returned false.
func members(b []byte, each func(key, val []byte) bool) bool {
	i := jsonscan.SkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	for i = jsonscan.SkipSpace(b, i+1); b[i] != '}'; {
		end, _ := jsonscan.SkipString(b, i)
		key := b[i+1 : end-1]
		i = jsonscan.SkipSpace(b, jsonscan.SkipSpace(b, end)+1) // past the colon
		vend, _ := jsonscan.SkipValue(b, i)
		if !each(key, b[i:vend]) {
			return false
		}
		if i = jsonscan.SkipSpace(b, vend); b[i] == ',' {
			i = jsonscan.SkipSpace(b, i+1)
		}
	}
	return true
}

// keyIndex is key's index in keys (-1: another key); plain is false when
// encoding/json might match key to one of them while bytes do not (an
// escape, another case).
func keyIndex(key []byte, keys []string) (k int, plain bool) {
	if bytes.IndexByte(key, '\\') >= 0 {
		return -1, false
	}
	for k, name := range keys {
		if string(key) == name {
			return k, true
		}
	}
	for _, name := range keys {
		if bytes.EqualFold(key, []byte(name)) { // encoding/json's own matching
			return -1, false
		}
	}
	return -1, true
}
