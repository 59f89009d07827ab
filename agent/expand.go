package agent

import "strings"

// ExpandEnv replaces each ${VAR} in s with getenv("VAR"); an unset variable
// becomes the empty string. Only the braced form is expanded: $VAR, a lone
// $, "${" without a closing brace and ${} stay as they are, so secrets with
// dollar signs in header templates survive. VAR is made of ASCII letters,
// digits and underscores; anything else leaves the ${…} untouched.
func ExpandEnv(s string, getenv func(string) string) string {
	out, _ := expandEnv(s, getenv, false)
	return out
}

// expandEnv is ExpandEnv; with values, it also returns the values it
// substituted (the secrets a header held).
func expandEnv(s string, getenv func(string) string, values bool) (string, []string) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var vals []string
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), vals
		}
		end := strings.IndexByte(s[i+2:], '}')
		if end < 0 {
			b.WriteString(s)
			return b.String(), vals
		}
		name := s[i+2 : i+2+end]
		if !validVarName(name) {
			b.WriteString(s[:i+2])
			s = s[i+2:]
			continue
		}
		b.WriteString(s[:i])
		v := getenv(name)
		if values && v != "" {
			vals = append(vals, v)
		}
		b.WriteString(v)
		s = s[i+2+end+1:]
	}
}

func validVarName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c != '_' && (c < 'A' || c > 'Z') && (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}
