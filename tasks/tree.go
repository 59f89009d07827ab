package tasks

import (
	"context"
	"fmt"
)

// MaxTreeNodes bounds the nodes Store.Tree reads (MaxChildren children
// per wait, MaxDepth deep: a tree can be far larger than anyone reads).
const MaxTreeNodes = 10000

// TreeNode is one task of a run tree (Store.Tree; `inspector task ID
// --tree --json`): its ID, agent, state, tokens and cost,
// and the children of its last children wait, in spawn order. A child
// with no record (not spawned yet, or expired) has State "".
type TreeNode struct {
	ID    string `json:"id"`
	Agent string `json:"agent,omitempty"`
	State State  `json:"state"`
	// Tokens and CostUSD are what the task used (its usage sum; the cost
	// once a priced attempt's is in it: Priced).
	Tokens   int64       `json:"tokens,omitempty"`
	CostUSD  float64     `json:"cost_usd,omitempty"`
	Priced   bool        `json:"priced,omitempty"`
	Children []*TreeNode `json:"children,omitempty"`
}

// Tree reads the run tree under task id, level by level (one round trip
// per level), at most MaxTreeNodes nodes (truncated says some were left
// out). ErrNotFound when id has no record.
func (s *Store) Tree(ctx context.Context, id string) (root *TreeNode, truncated bool, err error) {
	root = &TreeNode{ID: id}
	level, n := []*TreeNode{root}, 1
	for depth := 0; len(level) > 0 && depth <= MaxDepth; depth++ {
		ids := make([]string, len(level))
		for i, nd := range level {
			ids[i] = nd.ID
		}
		views, err := s.rec.Nodes(ctx, ids)
		if err != nil {
			return nil, false, err
		}
		if views[0] == nil && depth == 0 {
			return nil, false, fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		var next []*TreeNode
		for i, v := range views {
			if v == nil {
				continue
			}
			nd := level[i]
			nd.Agent, nd.State = v.Agent, v.State
			if u := v.Usage; u != nil {
				nd.Tokens, nd.CostUSD, nd.Priced = u.TotalTokens, u.CostUSD, u.Priced
			}
			for _, kid := range v.Children {
				if n >= MaxTreeNodes {
					truncated = true
					break
				}
				c := &TreeNode{ID: kid}
				nd.Children = append(nd.Children, c)
				next, n = append(next, c), n+1
			}
		}
		level = next
	}
	return root, truncated, nil
}
