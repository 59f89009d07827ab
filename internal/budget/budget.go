// Package budget keeps the budgets of tenants and agents — what their
// calls may use, in tokens and in US dollars, within a sliding window —
// for the whole fleet, and checks tasks' own caps (max_tokens,
// max_cost_usd) against their records' usage sums. A budget's unit is a token limit of its own,
// kept by internal/limit (the same Lua sliding-window log of debits,
// on keys named by rkeys.BudgetLimit); dollars are kept in micro-dollars.
// See docs/DESIGN.md, "Budgets".
package budget

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/limit"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/internal/usage"
)

// Kind is what a budget belongs to.
type Kind string

// The kinds of budget.
const (
	Tenant Kind = "tenant"
	Agent  Kind = "agent"
)

// ParseKind returns the kind named s (tenant or agent).
func ParseKind(s string) (Kind, error) {
	switch k := Kind(s); k {
	case Tenant, Agent:
		return k, nil
	}
	return "", fmt.Errorf("budget kind %q: want tenant or agent", s)
}

// Unit is what a budget counts.
type Unit string

// The units.
const (
	Tokens Unit = "tokens"
	USD    Unit = "usd"
)

// Budget is one tenant's or agent's budget (config.Budget, named).
type Budget struct {
	Kind Kind
	Name string
	// Tokens and USD are what the window may use (0: no such budget).
	Tokens int64
	USD    float64
	// Per is the window.
	Per time.Duration
}

// Label names the budget, e.g. "tenant acme"; the default tenant (whose
// tasks name none) is "tenant (default)", as inspector tenants and
// inspector task show it, not "tenant " with nothing after it.
func (b Budget) Label() string {
	if b.Kind == Tenant && b.Name == "" {
		return string(b.Kind) + " (default)"
	}
	return string(b.Kind) + " " + b.Name
}

// Text names the budget's unit u and its amount, for history, logs and
// errors, e.g. budget "tenant acme" tokens 50000/1h0m0s.
func (b Budget) Text(u Unit) string {
	if u == USD {
		return fmt.Sprintf("budget %q usd %g/%s", b.Label(), b.USD, b.Per)
	}
	return fmt.Sprintf("budget %q tokens %d/%s", b.Label(), b.Tokens, b.Per)
}

// Micros converts dollars to the micro-dollars a window keeps.
func Micros(usd float64) int64 { return int64(math.Round(usd * 1e6)) }

func (b Budget) config(u Unit) limit.Config {
	n := b.Tokens
	if u == USD {
		n = Micros(b.USD)
	}
	return limit.Config{Tokens: n, Per: b.Per}
}

func (b Budget) units() []Unit {
	var us []Unit
	if b.Tokens > 0 {
		us = append(us, Tokens)
	}
	if b.USD > 0 {
		us = append(us, USD)
	}
	return us
}

// ErrExhausted: a budget (or a task's own cap) has no room left.
var ErrExhausted = errors.New("budget exhausted")

// Over is a budget with no room left: the window's debits reached it.
// It is an error wrapping ErrExhausted.
type Over struct {
	Budget Budget
	Unit   Unit
	// ResetsIn is how long until enough debits leave the window for it to
	// have room again (by the Redis clock).
	ResetsIn time.Duration
}

func (o *Over) Error() string {
	return fmt.Sprintf("%s exhausted; it has room again in %s", o.Budget.Text(o.Unit), o.ResetsIn.Round(time.Second))
}

// Unwrap makes errors.Is(o, ErrExhausted) hold.
func (o *Over) Unwrap() error { return ErrExhausted }

// Keeper keeps budgets in Redis and reads tasks' usage sums. Safe for
// concurrent use.
type Keeper struct {
	rdb redis.UniversalClient
	lim *limit.Limiter
}

// New returns a Keeper on rdb; opts are the limiter's (a clock, a runner).
func New(rdb redis.UniversalClient, opts ...limit.Option) *Keeper {
	return &Keeper{rdb: rdb, lim: limit.New(rdb, opts...)}
}

func key(b Budget, u Unit) string { return rkeys.BudgetLimit(string(b.Kind), string(u), b.Name) }

// Check returns the first of bs with no room left (nil: every one has
// room), one script per unit set. When Redis cannot answer it returns an
// error wrapping limit.ErrUnavailable: a caller must not start the call.
func (k *Keeper) Check(ctx context.Context, bs ...Budget) (*Over, error) {
	for _, b := range bs {
		for _, u := range b.units() {
			a, err := k.lim.Admit(ctx, key(b, u), b.config(u))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", b.Text(u), err)
			}
			if !a.Allowed {
				return &Over{Budget: b, Unit: u, ResetsIn: a.RetryIn}, nil
			}
		}
	}
	return nil, nil
}

// Debit debits an attempt's usage from each of bs: its total tokens, and
// its cost when priced, as clamped (usage.Usage.Clamp: an absurd report
// debits the most an attempt may use, which exhausts the budget rather
// than overflowing its window). It returns the first error, after trying
// every debit.
func (k *Keeper) Debit(ctx context.Context, u usage.Usage, bs ...Budget) error {
	u = u.Clamp()
	var first error
	for _, b := range bs {
		for _, unit := range b.units() {
			n := tokensOf(u)
			if unit == USD {
				n = 0
				if u.Priced {
					n = Micros(u.CostUSD)
				}
			}
			if _, err := k.lim.Debit(ctx, key(b, unit), b.config(unit), n); err != nil && first == nil {
				first = fmt.Errorf("%s: %w", b.Text(unit), err)
			}
		}
	}
	return first
}

// tokensOf is what an attempt's usage debits from a token budget.
func tokensOf(u usage.Usage) int64 {
	if u.TotalTokens > 0 {
		return u.TotalTokens
	}
	return u.InputTokens + u.OutputTokens
}

// Reset forgets the debits of kind name's budget (both units): an
// operator's emergency override. Tasks waiting for it start at their next
// look (at most DeferMax later).
func (k *Keeper) Reset(ctx context.Context, kind Kind, name string) error {
	b := Budget{Kind: kind, Name: name}
	for _, u := range []Unit{Tokens, USD} {
		if err := k.lim.Forget(ctx, key(b, u)); err != nil {
			return err
		}
	}
	return nil
}

// DeferMax bounds how long a task over a budget is deferred at a time:
// it looks again at least this often, so that a reset (or a changed
// config) takes effect within it.
const DeferMax = time.Minute

// Status is a budget's state: the view of inspector budgets and of the
// budget object of /api/v1/agents. Fields may be added, never renamed.
type Status struct {
	Kind       Kind    `json:"kind"`
	Name       string  `json:"name"`
	Tokens     int64   `json:"tokens"`
	USD        float64 `json:"usd"`
	Per        string  `json:"per"`
	TokensUsed int64   `json:"tokens_used"`
	USDUsed    float64 `json:"usd_used"`
	// TokensLeft and USDLeft are what the window has left (never below 0;
	// 0 when the unit has no budget).
	TokensLeft int64   `json:"tokens_left"`
	USDLeft    float64 `json:"usd_left"`
	// Exhausted says whether a unit has no room left; ResetsIn is then how
	// long until it has (by the Redis clock).
	Exhausted bool          `json:"exhausted"`
	ResetsIn  time.Duration `json:"-"`
	ResetsMS  int64         `json:"resets_in_ms"`
}

// Status reads b's window, read-only.
func (k *Keeper) Status(ctx context.Context, b Budget) (Status, error) {
	st := Status{Kind: b.Kind, Name: b.Name, Tokens: b.Tokens, USD: b.USD, Per: b.Per.String()}
	for _, u := range b.units() {
		used, oldest, err := k.lim.Used(ctx, key(b, u), b.Per)
		if err != nil {
			return st, err
		}
		lim := b.config(u).Tokens
		if u == USD {
			st.USDUsed, st.USDLeft = float64(used)/1e6, float64(max(lim-used, 0))/1e6
		} else {
			st.TokensUsed, st.TokensLeft = used, max(lim-used, 0)
		}
		if used >= lim {
			st.Exhausted = true
			st.ResetsIn = max(st.ResetsIn, oldest)
		}
	}
	st.ResetsMS = st.ResetsIn.Milliseconds()
	return st, nil
}

// Spent is what one task's attempts used, all its runs together.
type Spent struct {
	Tokens int64
	USD    float64
}

// TaskSpent reads task id's usage sum from its record (the field the
// attempts' outcomes add to, record.FieldUsage): what its own cap is
// checked against.
func (k *Keeper) TaskSpent(ctx context.Context, id string) (Spent, error) {
	v, err := k.rdb.HGet(ctx, rkeys.Task(id), record.FieldUsage).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return Spent{}, fmt.Errorf("budget: task %q: spent: %w", id, err)
	}
	s := Spent{}
	if u := record.ParseUsageSum(v); u != nil {
		s.Tokens, s.USD = u.TotalTokens, u.CostUSD
	}
	return s, nil
}

// OverCap says whether s reached a task's cap (maxTokens, maxUSD; 0: no
// cap), and names it, e.g. max_tokens 2000 (used 2100).
func OverCap(s Spent, maxTokens int64, maxUSD float64) (string, bool) {
	if maxTokens > 0 && s.Tokens >= maxTokens {
		return fmt.Sprintf("max_tokens %d (used %d)", maxTokens, s.Tokens), true
	}
	if maxUSD > 0 && Micros(s.USD) >= Micros(maxUSD) {
		return fmt.Sprintf("max_cost_usd %g (used %g)", maxUSD, s.USD), true
	}
	return "", false
}
