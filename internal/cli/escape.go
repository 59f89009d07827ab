package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// clean renders s for a terminal: every character that is not printable
// — C0 and C1 control characters (ESC starts the sequences that set a
// window's title, clear the screen or rewrite earlier lines), DEL,
// bidirectional formatting characters and any other non-printing rune —
// becomes a Go-style escape (\n, \t, \x1b, \u202e), and so does each byte
// of invalid UTF-8 (\xff). Producers refuse such characters in what they
// enqueue (tasks.CheckText), but records written before that, or straight
// into Redis, still reach the inspector. JSON output goes through
// safeJSON instead.
func clean(s string) string { return escape(s, false) }

// cleanText is clean for a message of several lines (an error): its
// newlines and tabs are kept.
func cleanText(s string) string { return escape(s, true) }

// escape is clean; layout keeps newlines and tabs.
func escape(s string, layout bool) string {
	if !needsClean(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case printable(r), layout && (r == '\n' || r == '\t'):
			b.WriteString(s[i : i+n])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
		i += n
	}
	return b.String()
}

// needsClean reports whether clean would change s.
func needsClean(s string) bool {
	for i, r := range s {
		if (r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD")) || !printable(r) {
			return true
		}
	}
	return false
}

// printable: shown as itself. unicode.IsPrint refuses the control and
// format characters (bidi marks, overrides and isolates are format
// characters, class Cf) and every space but U+0020.
func printable(r rune) bool { return unicode.IsPrint(r) }

// tprintf is fmt.Fprintf for the inspector's and enqueuer's text output:
// every string argument (of any string type: tasks.State, …) and the text
// of every error argument is clean'd.
// Use it for every line that shows what came from Redis.
func tprintf(w io.Writer, format string, args ...any) {
	for i, a := range args {
		if err, ok := a.(error); ok {
			args[i] = clean(err.Error())
		} else if v := reflect.ValueOf(a); v.IsValid() && v.Kind() == reflect.String {
			args[i] = clean(v.String())
		}
	}
	fmt.Fprintf(w, format, args...)
}

// safeJSON rewrites JSON that encoding/json wrote so that it shows no
// non-printing character raw: encoding/json escapes C0 controls (and
// U+2028, U+2029) but writes DEL, the C1 controls (U+0080–U+009F, which
// some terminals obey: U+009B is CSI) and the bidirectional formatting
// characters as they are. Each becomes a \uXXXX escape (a surrogate pair
// past U+FFFF); such runes can only be inside JSON strings, so the
// document means the same.
func safeJSON(b []byte) []byte {
	if !needsClean(string(b)) {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if printable(r) || (r == utf8.RuneError && n == 1) || r == '\n' || r == '\t' || r == '\r' || r == ' ' {
			out = append(out, b[i:i+n]...)
		} else if r1, r2 := utf16.EncodeRune(r); r1 != unicode.ReplacementChar {
			out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
		} else {
			out = fmt.Appendf(out, `\u%04x`, r)
		}
		i += n
	}
	return out
}

// printJSON prints v as one line of JSON (safeJSON).
func printJSON(app *App, v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintln(app.Out, string(safeJSON(b)))
}

// jsonLines is a writer of whole JSON lines (each Write one line or more,
// as deadletter.Store.Export writes them) that passes them through
// safeJSON.
type jsonLines struct{ w io.Writer }

func (j jsonLines) Write(p []byte) (int, error) {
	if _, err := j.w.Write(safeJSON(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}
