package budget

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redisx"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/internal/usage"
)

// Tree budgets (see "Child tasks" in docs/DESIGN.md): a root task's
// max_tokens and max_cost_usd cover its whole tree. Every descendant's
// call debits its usage into the root's tree usage (rkeys.TaskTreeUsage:
// tokens and usd_micros), only when the tree has a cap; what the tree
// spent is the root's own usage sum plus it (TreeSpent).

// TreeUsageLife is how long a tree's usage is kept after its last debit:
// longer than a root may wait for its children (a wait is at most 365
// days) plus the records' retention.
const TreeUsageLife = 400 * 24 * time.Hour

// Fields of the tree usage hash.
const (
	treeTokens = "tokens"
	treeMicros = "usd_micros"
)

// DebitTree adds one call's usage u (clamped, as Debit does) of a task of
// root's tree to the tree's usage, in one MULTI.
func (k *Keeper) DebitTree(ctx context.Context, root string, u usage.Usage) error {
	u = u.Clamp()
	key := rkeys.TaskTreeUsage(root)
	cmds, err := k.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HIncrBy(ctx, key, treeTokens, tokensOf(u))
		if u.Priced {
			p.HIncrBy(ctx, key, treeMicros, Micros(u.CostUSD))
		}
		p.Expire(ctx, key, TreeUsageLife)
		return nil
	})
	if err = redisx.TxErr(cmds, err); err != nil {
		return fmt.Errorf("budget: tree of %q: debit: %w", root, err)
	}
	return nil
}

// TreeSpent is what root's tree has used: the root's own usage sum (its
// record's) plus its descendants' (the tree usage), in one round trip.
func (k *Keeper) TreeSpent(ctx context.Context, root string) (Spent, error) {
	var own *redis.StringCmd
	var tree *redis.SliceCmd
	_, err := k.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		own = p.HGet(ctx, rkeys.Task(root), record.FieldUsage)
		tree = p.HMGet(ctx, rkeys.TaskTreeUsage(root), treeTokens, treeMicros)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return Spent{}, fmt.Errorf("budget: tree of %q: spent: %w", root, err)
	}
	s := Spent{}
	if u := record.ParseUsageSum(own.Val()); u != nil {
		s.Tokens, s.USD = u.TotalTokens, u.CostUSD
	}
	if v := tree.Val(); len(v) == 2 {
		s.Tokens += atoi(v[0])
		s.USD += float64(atoi(v[1])) / 1e6
	}
	return s, nil
}

// atoi is an HMGET reply as an integer (0: absent).
func atoi(v any) int64 {
	s, _ := v.(string)
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}
