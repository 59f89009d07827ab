package console

import (
	"cmp"
	"context"
	"errors"

	"github.com/agentq/agentq/tasks"
)

// treeRowCap bounds the rows of a task page's run tree: a fan-out of
// tasks.MaxChildren children would make a page nobody reads.
const treeRowCap = 200

// treeRow is one task of a run tree as the task page draws it: the node
// (its ID, state, agent, tokens and cost), its depth under the tree's
// root, whether it is the page's task, and — on the page's task when it
// falls past the cap — how many rows were left out before it.
type treeRow struct {
	*tasks.TreeNode
	Depth   int
	Current bool
	Skipped int
}

// runTree is the "Run tree" block of a task page: the tree from the
// task's root (from the task itself when the root's record has
// expired), depth first in spawn order, at most treeRowCap rows (plus the
// page's task when it falls past them); More counts the tasks not shown
// after the last row, Truncated says the tree has more than
// tasks.MaxTreeNodes (More counts only those read). Err is why the tree
// could not be read.
type runTree struct {
	Root      string
	Rows      []treeRow
	More      int
	Truncated bool
	Err       string
}

// runTree reads the run tree of task v for its page: nil when the task
// is not part of a tree (no parent, no children).
func (c *Console) runTree(ctx context.Context, v *tasks.View) *runTree {
	if v.Parent == "" && len(v.Children) == 0 {
		return nil
	}
	root := cmp.Or(v.Root, v.Parent, v.ID)
	nd, truncated, err := c.Tasks.Tree(ctx, root)
	if errors.Is(err, tasks.ErrNotFound) && root != v.ID {
		root = v.ID
		nd, truncated, err = c.Tasks.Tree(ctx, root)
	}
	if err != nil {
		c.opts.Logger.Warn("console: run tree", "task", v.ID, "root", root, "err", err)
		return &runTree{Root: root, Err: err.Error()}
	}
	t := &runTree{Root: root, Truncated: truncated}
	var current *treeRow
	n := 0
	walkTree(nd, 0, func(row treeRow) {
		row.Current = row.ID == v.ID
		switch {
		case n < treeRowCap:
			t.Rows = append(t.Rows, row)
		case row.Current:
			row.Skipped = n - treeRowCap
			current = &row
		}
		n++
	})
	t.More = n - len(t.Rows)
	if current != nil {
		t.Rows = append(t.Rows, *current)
		t.More -= 1 + current.Skipped
	}
	return t
}

// walkTree calls visit for nd and each of its descendants, depth first
// in spawn order, nd at depth.
func walkTree(nd *tasks.TreeNode, depth int, visit func(treeRow)) {
	visit(treeRow{TreeNode: nd, Depth: depth})
	for _, kid := range nd.Children {
		walkTree(kid, depth+1, visit)
	}
}
