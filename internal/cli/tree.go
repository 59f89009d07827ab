package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/agentq/agentq/tasks"
)

// printTree is `inspector task ID --tree`: the run tree under task id
// (tasks.Store.Tree), a table of one line per task, indented by depth,
// with its state, agent, tokens and cost; --json: the tree as one JSON
// object (tasks.TreeNode). A tree cut at tasks.MaxTreeNodes says so on
// stderr.
func printTree(ctx context.Context, app *App, s *session, id string, asJSON bool) error {
	root, truncated, err := tasks.NewStore(s.rdb).Tree(ctx, id)
	if errors.Is(err, tasks.ErrNotFound) {
		return runtimeErr(fmt.Errorf("no task with ID %q (never enqueued, or its history has expired)", id))
	}
	if err != nil {
		return runtimeErr(err)
	}
	if truncated {
		fmt.Fprintf(app.Err, "the tree has more than %d tasks: the first %d are shown\n", tasks.MaxTreeNodes, tasks.MaxTreeNodes)
	}
	if asJSON {
		printJSON(app, root)
		return nil
	}
	w := table(app)
	fmt.Fprintln(w, "TASK\tSTATE\tAGENT\tTOKENS\tCOST")
	treeRows(w, root, 0)
	return w.Flush()
}

// treeRows writes the rows of nd and its descendants, nd at depth.
func treeRows(w io.Writer, nd *tasks.TreeNode, depth int) {
	state, tokens, cost := string(nd.State), "-", "-"
	if state == "" {
		state = "(no record)"
	}
	if nd.Tokens > 0 {
		tokens = fmt.Sprint(nd.Tokens)
	}
	if nd.Priced {
		cost = "$" + costText(nd.CostUSD)
	}
	tprintf(w, "%s%s\t%s\t%s\t%s\t%s\n", strings.Repeat("  ", depth), nd.ID, state, nd.Agent, tokens, cost)
	for _, c := range nd.Children {
		treeRows(w, c, depth+1)
	}
}
