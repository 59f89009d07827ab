// The decoder's YAML helpers: mappings (merge keys, aliases, duplicate
// keys), node descriptions for type errors, and "did you mean" suggestions.

package config

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// join appends key to the dotted path.
func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// deref follows aliases.
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.Tag == "!!null")
}

// describe names what a node holds, for type errors.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		kind := map[string]string{
			"!!str": "string", "!!int": "integer", "!!float": "number",
			"!!bool": "boolean", "!!timestamp": "timestamp", "!!binary": "binary",
		}[n.Tag]
		if kind == "" {
			kind = n.Tag
		}
		v := n.Value
		if len(v) > 40 {
			v = v[:40] + "…"
		}
		return fmt.Sprintf("%s %q", kind, v)
	}
	return "an unsupported value"
}

// pair is one key/value of a mapping.
type pair struct{ key, val *yaml.Node }

// pairs returns the entries of a mapping node, with YAML merge keys (<<)
// expanded (explicit keys win) and duplicate keys reported. ok is false (and
// an error recorded) when n is not a mapping; a null node yields no pairs.
func (d *decoder) pairs(n *yaml.Node, path string) ([]pair, bool) {
	n = deref(n)
	if isNull(n) {
		return nil, true
	}
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "must be a mapping, got %s", describe(n))
		return nil, false
	}
	var out, merged []pair
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), n.Content[i+1]
		if !d.spend(k, path) {
			return nil, false
		}
		if k.Kind == yaml.ScalarNode && k.Tag == "!!merge" {
			merged = append(merged, d.mergePairs(v, path, 0)...)
			continue
		}
		if k.Kind != yaml.ScalarNode {
			d.fail(k, path, "keys must be strings, got %s", describe(k))
			continue
		}
		if seen[k.Value] {
			d.fail(k, join(path, k.Value), "defined more than once")
			continue
		}
		seen[k.Value] = true
		out = append(out, pair{k, v})
	}
	for _, p := range merged {
		if !seen[p.key.Value] {
			seen[p.key.Value] = true
			out = append(out, p)
		}
	}
	return out, true
}

// mergePairs returns the entries a merge key's value brings in.
func (d *decoder) mergePairs(v *yaml.Node, path string, depth int) []pair {
	v = deref(v)
	if depth > 10 {
		d.fail(v, path, "merge keys nested too deeply")
		return nil
	}
	switch v.Kind {
	case yaml.MappingNode:
		ps, _ := d.pairs(v, path)
		return ps
	case yaml.SequenceNode:
		var out []pair
		for _, e := range v.Content {
			if !d.spend(e, path) {
				return nil
			}
			out = append(out, d.mergePairs(e, path, depth+1)...)
		}
		return out
	}
	d.fail(v, path, "merge key (<<) must refer to a mapping, got %s", describe(v))
	return nil
}

// suggest returns " (did you mean X?)" for the closest candidate, or "".
func suggest(got string, candidates []string) string {
	best, bestDist := "", 3
	for _, c := range candidates {
		if dist := editDistance(strings.ToLower(got), c); dist < bestDist {
			best, bestDist = c, dist
		}
	}
	if best == "" {
		if len(candidates) > 0 && len(candidates) <= 12 {
			return fmt.Sprintf(" (want one of %s)", strings.Join(candidates, ", "))
		}
		return ""
	}
	return fmt.Sprintf(" (did you mean %s?)", best)
}

// editDistance is the Levenshtein distance of a and b (bytes).
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 1 << 30
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// scalar returns the scalar node at n, or nil (after recording a type error
// naming want) when n is not a scalar. A null node returns nil silently.
func (d *decoder) scalar(n *yaml.Node, path, want string) *yaml.Node {
	n = deref(n)
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.ScalarNode {
		d.fail(n, path, "must be %s, got %s", want, describe(n))
		return nil
	}
	return n
}
