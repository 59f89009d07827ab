package tasks

import (
	"context"
	"fmt"

	"github.com/agentq/agentq/internal/amount"
)

// MaxTreeNodes bounds the nodes Store.Tree reads (MaxChildren children
// per wait, MaxDepth deep: a tree can be far larger than anyone reads).
const MaxTreeNodes = 10000

// TreeNode is one task of a run tree (Store.Tree; `inspector task ID
// --tree --json`): its ID, agent, state and usage (cost when priced),
// and the children of its last children wait, in spawn order. A child
// with no record (not spawned yet, or expired) has State "".
type TreeNode struct {
	ID       string        `json:"id"`
	Agent    string        `json:"agent,omitempty"`
	State    State         `json:"state"`
	Usage    *amount.Usage `json:"usage,omitempty"`
	Children []*TreeNode   `json:"children,omitempty"`
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
			nd.Agent, nd.State, nd.Usage = v.Agent, v.State, v.Usage
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
