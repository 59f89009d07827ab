package jsonscan

// MaxDepth is the deepest nesting of objects and arrays Valid accepts:
// encoding/json's own limit.
const MaxDepth = 10000

// Valid reports whether b is one valid JSON value, whitespace around it
// allowed: encoding/json.Valid's answer for every input (FuzzValid holds
// it to that, nesting limit included; like it, it does not check UTF-8),
// at a fraction of its cost. encoding/json's scanner takes an indirect
// call per byte; this is a plain loop, and a reply's bulk, its strings,
// is one tight loop of table lookups.
func Valid(b []byte) bool {
	var buf [64]byte
	stack := buf[:0] // the open containers, '{' or '['
	i := SkipSpace(b, 0)
	for {
		// A value starts at b[i].
		if i >= len(b) {
			return false
		}
		c, ok := b[i], false
		if c == '{' || c == '[' {
			if len(stack) >= MaxDepth {
				return false
			}
			stack = append(stack, c)
			if i = SkipSpace(b, i+1); i < len(b) && b[i] == c+2 { // '{'+2 is '}', '['+2 is ']'
				stack, i = stack[:len(stack)-1], i+1
			} else {
				if c == '{' {
					if i, ok = validKey(b, i); !ok {
						return false
					}
				}
				continue
			}
		} else if i, ok = validScalar(b, i); !ok {
			return false
		}
		if stack, i, ok = validAfter(b, i, stack); !ok {
			return false
		}
		if len(stack) == 0 {
			return true
		}
	}
}

// validAfter walks what follows a value ending at b[i]: the containers
// it closes, then the comma (and in an object the next key and its
// colon) before the next value, whose start it returns with the open
// containers. ok is false when b is not valid there. An empty stack
// returned with ok means b ended after its top-level value.
func validAfter(b []byte, i int, stack []byte) (_ []byte, _ int, ok bool) {
	for {
		i = SkipSpace(b, i)
		if len(stack) == 0 {
			return stack, i, i == len(b)
		}
		if i >= len(b) {
			return stack, i, false
		}
		top := stack[len(stack)-1]
		switch b[i] {
		case ',':
			i = SkipSpace(b, i+1)
			if top == '{' {
				i, ok = validKey(b, i)
				return stack, i, ok
			}
			return stack, i, true
		case top + 2: // its closing bracket
			stack, i = stack[:len(stack)-1], i+1
		default:
			return stack, i, false
		}
	}
}

// validKey walks an object's key at b[i] and its colon; it returns the
// start of the value.
func validKey(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return i, false
	}
	i, ok := validString(b, i)
	if i = SkipSpace(b, i); !ok || i >= len(b) || b[i] != ':' {
		return i, false
	}
	return SkipSpace(b, i+1), true
}

// validScalar walks the string, number or literal at b[i] (i < len(b)).
func validScalar(b []byte, i int) (int, bool) {
	switch c := b[i]; {
	case c == '"':
		return validString(b, i)
	case c == '-' || (c >= '0' && c <= '9'):
		return validNumber(b, i)
	case c == 't':
		return validLiteral(b, i, "true")
	case c == 'f':
		return validLiteral(b, i, "false")
	case c == 'n':
		return validLiteral(b, i, "null")
	}
	return i, false
}

// plain marks the bytes a string holds as they are: not the quote, not
// the backslash, not a control character.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// validString walks the string at b[i] (its opening quote) and returns
// the index past its closing quote.
func validString(b []byte, i int) (int, bool) {
	for i++; i < len(b); i++ {
		if plain[b[i]] {
			continue
		}
		switch b[i] {
		case '"':
			return i + 1, true
		case '\\':
			if i++; i >= len(b) {
				return i, false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) || !isHex(b[i+1]) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) {
					return i, false
				}
				i += 4
			default:
				return i, false
			}
		default: // a control character
			return i, false
		}
	}
	return i, false
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// validNumber walks the number at b[i]: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func validNumber(b []byte, i int) (int, bool) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i)
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		if j := digits(b, i+1); j > i+1 {
			i = j
		} else {
			return i, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return i, false
		}
		i = j
	}
	return i, true
}

// digits returns the index past the digits at b[i].
func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// validLiteral walks the literal lit at b[i].
func validLiteral(b []byte, i int, lit string) (int, bool) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return i, false
	}
	return i + len(lit), true
}
