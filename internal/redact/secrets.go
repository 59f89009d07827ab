package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"sort"
	"strings"
)

// Marker replaces every secret value a Secrets finds in a text.
const Marker = "[REDACTED]"

// MinSecretLen is the length below which a value is not treated as a
// secret: replacing every "json" or "1234" in a text would mangle it, and
// values that short are not credentials.
const MinSecretLen = 6

// Secrets replaces known secret values, and their obvious encodings, in
// texts about to be stored or logged: an upstream that echoes the API key
// it was sent ("invalid api key (you sent Authorization: Bearer sk-…)")
// must not put that key in a task's history, its dead letter or a log.
//
// For each value (MinSecretLen bytes or more) it looks for: the value; the
// credential after an auth scheme ("Bearer sk-…" also redacts "sk-…"); for
// Basic credentials, the decoded "user:password" and each of its parts;
// and for each of these forms its standard and URL-safe base64 (padded and
// raw), its URL query and path escapings and its JSON string escaping.
// Longer forms win over shorter ones at the same place. It cannot find a
// secret that was cut, reformatted or encoded otherwise (hex, a base64 of
// a longer text that contains it).
//
// A nil *Secrets, or one built from no usable value, returns texts as
// they are. A Secrets is safe for concurrent use.
type Secrets struct {
	forms []string // longest first
	r     *strings.Replacer
}

// NewSecrets returns the redactor of values; values shorter than
// MinSecretLen are ignored. It returns nil when nothing is left.
func NewSecrets(values ...string) *Secrets {
	set := map[string]struct{}{}
	for _, v := range values {
		for _, f := range plainForms(v) {
			for _, e := range encodings(f) {
				if len(e) >= MinSecretLen {
					set[e] = struct{}{}
				}
			}
		}
	}
	if len(set) == 0 {
		return nil
	}
	forms := make([]string, 0, len(set))
	for f := range set {
		forms = append(forms, f)
	}
	// strings.Replacer tries its patterns in argument order at each
	// position: longest first, so "Bearer sk-…" wins over "sk-…".
	sort.Slice(forms, func(i, j int) bool {
		if len(forms[i]) != len(forms[j]) {
			return len(forms[i]) > len(forms[j])
		}
		return forms[i] < forms[j]
	})
	pairs := make([]string, 0, 2*len(forms))
	for _, f := range forms {
		pairs = append(pairs, f, Marker)
	}
	return &Secrets{forms: forms, r: strings.NewReplacer(pairs...)}
}

// plainForms are v and the credentials inside it: the part after an auth
// scheme ("Bearer X", "Basic X", "token X") and, when that part is Basic
// base64, the decoded user:password and its two halves.
func plainForms(v string) []string {
	v = strings.TrimSpace(v)
	if len(v) < MinSecretLen {
		return nil
	}
	out := []string{v}
	scheme, cred, ok := strings.Cut(v, " ")
	cred = strings.TrimSpace(cred)
	if !ok || cred == "" || strings.ContainsAny(scheme, "=:,;\"") {
		return out
	}
	out = append(out, cred)
	if strings.EqualFold(scheme, "Basic") {
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding} {
			dec, err := enc.DecodeString(cred)
			if err != nil {
				continue
			}
			out = append(out, string(dec))
			if user, pass, ok := strings.Cut(string(dec), ":"); ok {
				out = append(out, user, pass)
			}
			break
		}
	}
	return out
}

// encodings are f and the ways a server is likely to echo it.
func encodings(f string) []string {
	if len(f) < MinSecretLen {
		return nil
	}
	b := []byte(f)
	out := []string{
		f,
		base64.StdEncoding.EncodeToString(b),
		base64.RawStdEncoding.EncodeToString(b),
		base64.URLEncoding.EncodeToString(b),
		base64.RawURLEncoding.EncodeToString(b),
		url.QueryEscape(f),
		url.PathEscape(f),
		strings.ReplaceAll(url.QueryEscape(f), "+", "%20"),
	}
	// JSON string escaping, with and without HTML escaping (<>& as \u003c…).
	if j, err := json.Marshal(f); err == nil {
		out = append(out, string(j[1:len(j)-1]))
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(f) == nil {
		j := bytes.TrimSpace(buf.Bytes())
		out = append(out, string(j[1:len(j)-1]))
	}
	return out
}

// String returns text with every form of every secret replaced by Marker.
func (s *Secrets) String(text string) string {
	if s == nil || text == "" {
		return text
	}
	return s.r.Replace(text)
}

// minFragment is the shortest piece of a secret Clipped removes from the
// ends of a text.
const minFragment = 4

// Clipped is String for a text that was cut from a longer one (the first
// bytes of a body, the last of a stderr): a secret cut by the cap shows
// only a piece, which String cannot recognize. Clipped also replaces a
// text's end that is the beginning of a form of a secret, and its start
// that is the end of one, when that piece has minFragment bytes or more.
func (s *Secrets) Clipped(text string) string {
	if s == nil || text == "" {
		return text
	}
	text = s.r.Replace(text)
	for _, f := range s.forms {
		for k := min(len(f)-1, len(text)); k >= minFragment; k-- {
			if strings.HasSuffix(text, f[:k]) {
				text = text[:len(text)-k] + Marker
				break
			}
		}
		for k := min(len(f)-1, len(text)); k >= minFragment; k-- {
			if strings.HasPrefix(text, f[len(f)-k:]) {
				text = Marker + text[k:]
				break
			}
		}
	}
	return text
}

// Contains reports whether text holds a form of a secret.
func (s *Secrets) Contains(text string) bool {
	if s == nil {
		return false
	}
	for _, f := range s.forms {
		if strings.Contains(text, f) {
			return true
		}
	}
	return false
}

// JSON returns raw (a JSON document, a result's data) with the secrets
// replaced. A replacement that leaves invalid JSON (a secret that spanned
// a string's quote) turns the whole redacted text into a JSON string.
func (s *Secrets) JSON(raw []byte) []byte {
	if s == nil || len(raw) == 0 {
		return raw
	}
	text := string(raw)
	red := s.r.Replace(text)
	if red == text {
		return raw
	}
	if json.Valid([]byte(red)) {
		return []byte(red)
	}
	q, _ := json.Marshal(red) // a string cannot fail
	return q
}

// Error returns err unchanged when its text holds no secret, else an error
// whose text is redacted and which unwraps to err (errors.Is and errors.As
// still see the whole chain; only the top's text is safe to print).
func (s *Secrets) Error(err error) error {
	if s == nil || err == nil {
		return err
	}
	text := err.Error()
	red := s.r.Replace(text)
	if red == text {
		return err
	}
	return &redactedError{text: red, err: err}
}

type redactedError struct {
	text string
	err  error
}

func (e *redactedError) Error() string { return e.text }
func (e *redactedError) Unwrap() error { return e.err }
