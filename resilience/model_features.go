package resilience

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// The learned model (model.go) reads an error text as a bag of features
// that transfer between providers and tools better than exact phrases do:
//
//   - w:<word>: a word, lower-cased, with CamelCase split ("RateLimitError"
//     gives rate, limit, error and the whole ratelimiterror); an HTTP-status
//     number stays itself ("429"), another number becomes "#";
//   - b:<word> <word>: two neighbouring words;
//   - c:<4 letters>: the four-letter pieces of a word padded with "_"
//     ("throttled" → _thr, thro, hrot, …), so that "throttling",
//     "throttled" and "ThrottlingException" share evidence;
//   - h:<han>: pairs of CJK characters (Chinese gateways' "余额不足").
//
// Features are deduplicated; the model weighs each once.

// modelScanHead and modelScanTail bound the text the model reads: the head
// (an exception and its message, a JSON body) and the tail (a traceback's
// last lines).
const (
	modelScanHead = 3 << 10
	modelScanTail = 1 << 10
)

// maxModelWords bounds the words read from one text.
const maxModelWords = 400

// textFeatures returns the distinct features of text (see above), in first
// occurrence order.
func textFeatures(text string) []string {
	if len(text) > modelScanHead+modelScanTail {
		text = text[:modelScanHead] + "\n" + text[len(text)-modelScanTail:]
	}
	words := modelWords(text)
	seen := make(map[string]struct{}, 4*len(words))
	out := make([]string, 0, 4*len(words))
	add := func(f string) {
		if _, ok := seen[f]; !ok {
			seen[f] = struct{}{}
			out = append(out, f)
		}
	}
	prev := ""
	for _, w := range words {
		if w == "" { // a sentence break: no bigram across it
			prev = ""
			continue
		}
		if isHan(w) {
			for i, r := range []rune(w) {
				if i > 0 {
					add("h:" + string([]rune(w)[i-1]) + string(r))
				}
			}
			prev = ""
			continue
		}
		add("w:" + w)
		if prev != "" {
			add("b:" + prev + " " + w)
		}
		prev = w
		if len(w) >= 4 && w[0] != '#' && !isNumberWord(w) {
			p := "_" + w + "_"
			for i := 0; i+4 <= len(p); i++ {
				add("c:" + p[i:i+4])
			}
		}
	}
	return out
}

// modelWords splits text into lower-case words (see textFeatures); an
// empty word marks a break (a new line or sentence punctuation).
func modelWords(text string) []string {
	var words []string
	i := 0
	for i < len(text) && len(words) < maxModelWords {
		r, size := utf8.DecodeRuneInString(text[i:])
		switch {
		case r < utf8.RuneSelf && isWordByte(byte(r)) && r != '_':
			j := i
			for j < len(text) && text[j] < utf8.RuneSelf && isWordByte(text[j]) && text[j] != '_' {
				j++
			}
			words = appendToken(words, text[i:j])
			i = j
			continue
		case r >= utf8.RuneSelf && unicode.Is(unicode.Han, r):
			j := i
			for j < len(text) {
				r2, s2 := utf8.DecodeRuneInString(text[j:])
				if r2 < utf8.RuneSelf || !unicode.Is(unicode.Han, r2) {
					break
				}
				j += s2
			}
			words = append(words, text[i:j])
			i = j
			continue
		case r == '\n' || r == '.' || r == ';' || r == '|' || r == '{' || r == '}':
			if n := len(words); n > 0 && words[n-1] != "" {
				words = append(words, "")
			}
		}
		i += size
	}
	return words
}

// appendToken appends the words of one ASCII token: a number as itself (an
// HTTP status) or "#", a CamelCase token as its parts and, when it has
// several, the whole token lower-cased.
func appendToken(words []string, tok string) []string {
	if isNumberWord(tok) {
		if len(tok) == 3 && tok[0] >= '1' && tok[0] <= '5' {
			return append(words, tok)
		}
		return append(words, "#")
	}
	if hasDigitAndLetters(tok) && len(tok) >= 12 { // an ID, a hash, a key
		return append(words, "#id")
	}
	parts := camelParts(tok)
	for _, p := range parts {
		if isNumberWord(p) {
			words = append(words, "#")
			continue
		}
		words = append(words, strings.ToLower(p))
	}
	if len(parts) > 1 {
		words = append(words, strings.ToLower(tok))
	}
	return words
}

// camelParts splits "RateLimitError" into Rate, Limit, Error and
// "HTTPError" into HTTP, Error; a token in one case stays whole.
func camelParts(tok string) []string {
	var parts []string
	start := 0
	for i := 1; i < len(tok); i++ {
		c, p := tok[i], tok[i-1]
		upper := 'A' <= c && c <= 'Z'
		switch {
		case upper && 'a' <= p && p <= 'z':
		case upper && 'A' <= p && p <= 'Z' && i+1 < len(tok) && 'a' <= tok[i+1] && tok[i+1] <= 'z':
		case isDigit(c) != isDigit(p):
		default:
			continue
		}
		parts = append(parts, tok[start:i])
		start = i
	}
	return append(parts, tok[start:])
}

func isNumberWord(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return s != ""
}

func hasDigitAndLetters(s string) bool {
	digit, letter := false, false
	for i := 0; i < len(s); i++ {
		if isDigit(s[i]) {
			digit = true
		} else {
			letter = true
		}
	}
	return digit && letter
}

func isHan(w string) bool {
	r, _ := utf8.DecodeRuneInString(w)
	return r >= utf8.RuneSelf && unicode.Is(unicode.Han, r)
}
