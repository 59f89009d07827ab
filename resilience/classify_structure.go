package resilience

import (
	"regexp"
	"strconv"
	"strings"
)

// Structure that transfers between families: the vocabularies that many
// tools share because they share a library or a standard — curl's error
// numbers (curl, PHP, git, cargo, R…), Apple's NSURLErrorDomain codes
// (every iOS/macOS client), HTTP reason phrases standing without their
// number, and the words of the identifiers programs name their failures
// with: exception class names (InvalidDimensionException,
// Stripe::InvalidRequestError) and error codes (SlowDown,
// ZONE_RESOURCE_POOL_EXHAUSTED, ACCESS_REFUSED). They decide what the text
// table leaves open, before the learned model.

// structureClass is the class a text's shared vocabularies name, and which
// one ("" when none decides).
func structureClass(ev evidence) (Class, string) {
	if c := curlClass(ev.lower); c != "" {
		return c, "curl error code"
	}
	if c := nsURLClass(ev.text); c != "" {
		return c, "NSURLErrorDomain code"
	}
	if c, id := identifierClass(ev.text); c != "" {
		return c, "identifier " + id
	}
	return "", ""
}

// curlRe finds curl's error number: "curl: (6) Could not resolve host",
// "cURL error 28: …", "curl error 7", "[28] Timeout was reached" after
// "curl".
var curlRe = regexp.MustCompile(`curl(?:[ _]error|:)?\s*[:(\[#]?\s*\(?([0-9]{1,2})\)?[:\] ]`)

// curlClasses maps libcurl's CURLcode values (libcurl-errors(3)).
var curlClasses = map[int]Class{
	1: NotSupported, 3: NetworkPermanent, 5: NetworkPermanent, 6: NetworkPermanent,
	7: NetworkTransient, 16: NetworkTransient, 18: NetworkTransient, 28: Timeout,
	35: NetworkTransient, 47: InvalidRequest, 51: NetworkPermanent, 52: NetworkTransient,
	55: NetworkTransient, 56: NetworkTransient, 58: NetworkPermanent, 60: NetworkPermanent,
	77: NetworkPermanent, 92: NetworkTransient, 95: NetworkTransient,
}

func curlClass(lower string) Class { return codeClass(lower, "curl", curlRe, curlClasses) }

// nsURLRe finds an NSURLErrorDomain code ("Error Domain=NSURLErrorDomain
// Code=-1001").
var nsURLRe = regexp.MustCompile(`NSURLErrorDomain\s+Code=(-[0-9]{3,4})`)

// nsURLClasses maps NSURLError codes (Apple's URL Loading System).
var nsURLClasses = map[int]Class{
	-999: Canceled, -1001: Timeout, -1002: NetworkPermanent, -1003: NetworkPermanent,
	-1004: NetworkTransient, -1005: NetworkTransient, -1006: NetworkTransient,
	-1009: NetworkTransient, -1011: ProviderError, -1018: NetworkTransient,
	-1020: NetworkTransient, -1200: NetworkPermanent, -1201: NetworkPermanent,
	-1202: NetworkPermanent, -1203: NetworkPermanent, -1204: NetworkPermanent,
}

func nsURLClass(text string) Class {
	return codeClass(text, "NSURLErrorDomain", nsURLRe, nsURLClasses)
}

// codeClass is the class classes gives the number re captures in text,
// looked for only when text mentions marker; "" when none.
func codeClass(text, marker string, re *regexp.Regexp, classes map[int]Class) Class {
	if !strings.Contains(text, marker) {
		return ""
	}
	m := re.FindStringSubmatch(text)
	if m == nil {
		return ""
	}
	n, _ := strconv.Atoi(m[1])
	return classes[n]
}

// identifierRe finds the identifiers programs name failures with: a
// CamelCase word ending in Error, Exception, Fault or Failure (with its
// namespace), a CamelCase or UPPER_SNAKE code in parentheses after "error
// occurred" (botocore) or after "code:" / "code=", and an UPPER_SNAKE token
// of two words or more.
var identifierRe = regexp.MustCompile(`\b([A-Z][A-Za-z0-9]*(?:Error|Exception|Fault|Failure))\b|(?i:error occurred|code[:=]|code:\s*\()\s*\(?([A-Za-z][A-Za-z0-9_]{3,63})|\b([A-Z][A-Z0-9]+(?:_[A-Z0-9]+)+)\b`)

// identifierClass is the class the first identifier whose words decide
// names, and that identifier.
func identifierClass(text string) (Class, string) {
	for _, m := range identifierRe.FindAllStringSubmatch(text, 16) {
		id := m[1] + m[2] + m[3]
		if c := identifierWordsClass(identifierWords(id)); c != "" {
			return c, id
		}
	}
	return "", ""
}

// identifierWords is id as lower-case words joined by single spaces, padded
// with spaces: "InvalidRequestError" → " invalid request error ",
// "ZONE_RESOURCE_POOL_EXHAUSTED" → " zone resource pool exhausted ".
func identifierWords(id string) string {
	var b strings.Builder
	b.WriteByte(' ')
	for _, tok := range strings.FieldsFunc(id, func(r rune) bool { return r == '_' || r == '.' || r == ':' }) {
		for _, p := range camelParts(tok) {
			b.WriteString(strings.ToLower(p))
			b.WriteByte(' ')
		}
	}
	return b.String()
}

// identifierLexicon maps the words of an identifier to a class; the first
// row with a match wins, so the specific rows come first. Each phrase is
// whole words (" rate limit " matches RateLimitError, not
// CorporateLimit).
var identifierLexicon = []struct {
	class   Class
	phrases []string
}{
	{Canceled, []string{" cancelled ", " canceled ", " cancellation ", " abort ", " aborted "}},
	{ContextLength, []string{" context length ", " context window ", " token limit ", " tokens limit ", " too many tokens "}},
	{QuotaExhausted, []string{" quota ", " billing ", " credit ", " credits ", " insufficient balance ", " insufficient funds ", " payment required ", " spending limit "}},
	{RateLimited, []string{" rate limit ", " ratelimit ", " rate limited ", " throttling ", " throttled ", " throttle ", " too many requests ", " slow down ", " overloaded ", " resource exhausted ", " resource pool exhausted ", " capacity "}},
	{Timeout, []string{" timeout ", " timed out ", " deadline exceeded ", " read timeout "}},
	{NotSupported, []string{" not implemented ", " unimplemented ", " unsupported ", " not supported ", " model not found "}},
	{NetworkPermanent, []string{" certificate ", " cert ", " unknown host ", " name not resolved ", " host not found "}},
	{NetworkTransient, []string{" connection ", " connect ", " socket ", " network ", " unreachable ", " broken pipe ", " remote disconnected ", " protocol "}},
	{InvalidRequest, []string{" invalid ", " validation ", " bad request ", " unauthorized ", " unauthenticated ", " forbidden ", " permission ", " access denied ", " access refused ", " not found ", " no such ", " authentication ", " auth ", " credentials ", " illegal argument ", " unprocessable ", " conflict ", " precondition ", " expired token ", " signature does not match ", " missing "}},
	{ProviderError, []string{" internal ", " service unavailable ", " server error ", " bad gateway ", " upstream "}},
	{LogicError, []string{" type error ", " attribute error ", " key error ", " index error ", " name error ", " null pointer ", " nil pointer ", " assertion ", " recursion ", " stack overflow ", " import error ", " module not found ", " syntax error ", " json decode ", " unmarshal ", " parse ", " parsing ", " decode ", " out of memory "}},
}

func identifierWordsClass(words string) Class {
	for _, row := range identifierLexicon {
		for _, p := range row.phrases {
			if strings.Contains(words, p) {
				return row.class
			}
		}
	}
	return ""
}

// parenStatusRe finds a status in the parenthesised shapes SDKs print:
// "Unexpected Response: 400 (Bad Request)", "Bad Request (400)",
// "ApiException: (400)".
var parenStatusRe = regexp.MustCompile(`\b([45][0-9]{2}) \([A-Z][A-Za-z -]+\)|[A-Z][a-z]+(?: [A-Z][a-z]+)* \(([45][0-9]{2})\)|(?i:exception|response|error|status):?\s*\(([45][0-9]{2})\)`)

// reasonStatuses are HTTP reason phrases (RFC 9110) that, written as
// such — Title Case, whole words — say the status without its number
// ("err_code":"Bad Request", "Too Many Requests").
var reasonStatuses = []struct {
	phrase string
	status int
}{
	{"Too Many Requests", 429}, {"Payment Required", 402}, {"Request Entity Too Large", 413},
	{"Payload Too Large", 413}, {"Gateway Timeout", 504}, {"Gateway Time-out", 504},
	{"Request Timeout", 408}, {"Service Unavailable", 503}, {"Bad Gateway", 502},
	{"Internal Server Error", 500}, {"Method Not Allowed", 405}, {"Not Implemented", 501},
	{"Unprocessable Entity", 422}, {"Bad Request", 400}, {"Unauthorized", 401},
	{"Forbidden", 403}, {"Not Found", 404},
}

// reasonStatus is the status a text says in parentheses or by a reason
// phrase alone; 0 if none.
func reasonStatus(text string) int {
	if m := parenStatusRe.FindStringSubmatch(text); m != nil {
		n, _ := strconv.Atoi(m[1] + m[2] + m[3])
		return n
	}
	for _, r := range reasonStatuses {
		for from := 0; ; {
			i := strings.Index(text[from:], r.phrase)
			if i < 0 {
				break
			}
			i += from
			end := i + len(r.phrase)
			if (i == 0 || !isWordByte(text[i-1])) && (end == len(text) || !isWordByte(text[end])) {
				return r.status
			}
			from = end
		}
	}
	return 0
}
