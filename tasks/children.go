package tasks

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/rkeys"
)

// The bounds of child tasks: at most MaxChildren children per wait, and
// a tree at most MaxDepth deep (a child's depth is its parent's + 1; a
// task a producer enqueued has depth 0).
const (
	MaxChildren = 1000
	MaxDepth    = 8
)

// ErrInvalidChildren is wrapped by every refusal of a children wait's
// specs (ChildEnvelopes, SpawnChildren): none or too many children, too
// deep a tree, a child ID that is the parent's own or an ancestor's or
// named twice, an invalid child spec (its *ValidationError is wrapped
// too). The delivery fails the attempt logic_error with it.
var ErrInvalidChildren = errors.New("invalid children")

// ChildSpec is one child of a children wait, as an agent writes it (the
// wait's "children" list): a task spec with the fields and JSON names of
// Request. ID names the child (any task ID); Name, when ID is empty,
// derives it ("<parentID>.<name>"); neither: "<parentID>.<k>" (k the
// 1-based position). Tenant defaults to the parent's, Queue to the
// parent's; Deadline (a Go duration from the spawn, or an RFC 3339 time)
// is at most the parent's.
type ChildSpec struct {
	ID     string          `json:"id,omitempty"`
	Name   string          `json:"name,omitempty"`
	Agent  string          `json:"agent"`
	Action string          `json:"action,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	// CorrelationID defaults to the parent's.
	CorrelationID string   `json:"correlation_id,omitempty"`
	Queue         string   `json:"queue,omitempty"`
	Tenant        string   `json:"tenant,omitempty"`
	Priority      string   `json:"priority,omitempty"`
	Deadline      string   `json:"deadline,omitempty"`
	Notify        []string `json:"notify,omitempty"`
	MaxTokens     int64    `json:"max_tokens,omitempty"`
	MaxCostUSD    float64  `json:"max_cost_usd,omitempty"`
}

// ChildEnd is how a child ended, as its parent keeps it (the child ends)
// and its agent gets it (the ActionRequest's children, in spawn order):
// State is the child's terminal state, Result its result once it
// succeeded, ErrorClass and Error why it did not.
type ChildEnd struct {
	ID         string          `json:"id"`
	Name       string          `json:"name,omitempty"`
	State      State           `json:"state"`
	Result     json.RawMessage `json:"result,omitempty"`
	ErrorClass string          `json:"error_class"`
	Error      string          `json:"error"`
}

// rec is e as package record keeps it.
func (e ChildEnd) rec() record.ChildEnd {
	return record.ChildEnd{ID: e.ID, Name: e.Name, State: e.State, Result: e.Result, ErrorClass: e.ErrorClass, Error: e.Error}
}

// ChildID is the ID of the child spec at 1-based position k of a wait of
// parentID: spec.ID, else "<parentID>.<spec.Name>", else
// "<parentID>.<k>". Stable across a repeated suspend.
func ChildID(parentID string, k int, spec ChildSpec) string {
	switch {
	case spec.ID != "":
		return spec.ID
	case spec.Name != "":
		return parentID + "." + spec.Name
	}
	return parentID + "." + strconv.Itoa(k)
}

// ChildEnvelopes checks specs, the children of a wait of parent, and
// returns their envelopes (parent, root, depth and the tree's caps set),
// enqueued at now. ancestors are the IDs of parent's ancestors (a child
// may not be one of them, nor parent itself). Errors wrap
// ErrInvalidChildren.
func (c *Client) ChildEnvelopes(parent *Envelope, ancestors []string, specs []ChildSpec, now time.Time) ([]*Envelope, error) {
	switch {
	case len(specs) == 0:
		return nil, fmt.Errorf("%w: a children wait needs at least one child", ErrInvalidChildren)
	case len(specs) > MaxChildren:
		return nil, fmt.Errorf("%w: %d children; at most %d per wait", ErrInvalidChildren, len(specs), MaxChildren)
	case parent.Depth+1 > MaxDepth:
		return nil, fmt.Errorf("%w: the children would be at depth %d; a tree is at most %d deep", ErrInvalidChildren, parent.Depth+1, MaxDepth)
	}
	taken := map[string]bool{parent.ID: true}
	for _, a := range ancestors {
		taken[a] = true
	}
	seen := make(map[string]bool, len(specs))
	out := make([]*Envelope, len(specs))
	for i, sp := range specs {
		env, err := c.childEnvelope(parent, sp, ChildID(parent.ID, i+1, sp), now)
		if err != nil {
			return nil, fmt.Errorf("%w: child %d: %w", ErrInvalidChildren, i+1, err)
		}
		switch {
		case taken[env.ID]:
			return nil, fmt.Errorf("%w: child %d: ID %q is the task's own or an ancestor's", ErrInvalidChildren, i+1, env.ID)
		case seen[env.ID]:
			return nil, fmt.Errorf("%w: child %d: ID %q names another child of the wait too", ErrInvalidChildren, i+1, env.ID)
		}
		seen[env.ID] = true
		out[i] = env
	}
	return out, nil
}

// childEnvelope is the checked envelope of child spec sp of parent, with
// ID id.
func (c *Client) childEnvelope(parent *Envelope, sp ChildSpec, id string, now time.Time) (*Envelope, error) {
	env := &Envelope{
		ID: id, Agent: sp.Agent, Action: sp.Action, Params: sp.Params, CorrelationID: cmp.Or(sp.CorrelationID, parent.CorrelationID),
		Queue: sp.Queue, Tenant: sp.Tenant, Priority: NormPriority(sp.Priority), EnqueuedAt: now.UTC(),
		Notify: sp.Notify, MaxTokens: sp.MaxTokens, MaxCostUSD: sp.MaxCostUSD,
		Traceparent: parent.Traceparent, Tracestate: parent.Tracestate,
		Parent: parent.ID, Root: parent.Root, Depth: parent.Depth + 1,
		TreeMaxTokens: parent.TreeMaxTokens, TreeMaxCostUSD: parent.TreeMaxCostUSD,
	}
	if env.Root == "" { // parent is the root: its own caps are the tree's
		env.Root, env.TreeMaxTokens, env.TreeMaxCostUSD = parent.ID, parent.MaxTokens, parent.MaxCostUSD
	}
	if env.Queue == "" {
		env.Queue = parent.Queue
	}
	if sp.Tenant == "" {
		env.Tenant = parent.Tenant
	}
	if err := env.childDeadline(parent, sp.Deadline, now); err != nil {
		return nil, err
	}
	if err := env.Validate(); err != nil {
		return nil, err
	}
	if err := c.checkTask(env, true); err != nil {
		return nil, err
	}
	return env, nil
}

// childDeadline sets env's deadline: spec's (a Go duration from now or
// an RFC 3339 time; "": none), at most parent's.
func (env *Envelope) childDeadline(parent *Envelope, spec string, now time.Time) error {
	var dl time.Time
	if spec != "" {
		var err error
		if dl, err = ParseDeadline(spec, now); err != nil {
			return err
		}
	}
	if p := parent.DeadlineTime(); !p.IsZero() && (dl.IsZero() || p.Before(dl)) {
		dl = p
	}
	if err := CheckDeadline(dl, now, 0); err != nil {
		return err
	}
	if !dl.IsZero() {
		env.Deadline = dl.UnixMilli()
	}
	return nil
}

// Ancestors reads the IDs of task id's ancestors from the records'
// parent fields, nearest first (at most MaxDepth reads; a record gone
// ends the walk).
func (c *Client) Ancestors(ctx context.Context, env *Envelope) ([]string, error) {
	var out []string
	for p := env.Parent; p != "" && len(out) <= MaxDepth; {
		out = append(out, p)
		next, err := c.store.rdb.HGet(ctx, rkeys.Task(p), record.FieldParent).Result()
		if err != nil {
			break // no record (expired), or no parent: the walk ends
		}
		p = next
	}
	return out, nil
}

// PrepareChildren checks specs, the children of a wait of parent (mode
// record.ModeAll or record.ModeAny), and stores the wait for the run that
// waits (run: the run the Waiting write moves the record to) in the
// parent's slot (record.Store.SetChildren: the ordered child IDs, each
// child's name and envelope for the children repair, the repair index).
// Call it before the Waiting write, then SpawnChildren after it. A
// repeated wait of the same run keeps the first (stored false). Invalid
// specs wrap ErrInvalidChildren; a parent that is canceled, ended or at
// a newer run is a *record.ChildrenRefusedError.
func (c *Client) PrepareChildren(ctx context.Context, parent *Envelope, run int, mode string, specs []ChildSpec) (stored bool, err error) {
	if mode != record.ModeAll && mode != record.ModeAny {
		return false, fmt.Errorf("%w: mode is %q; expected %q or %q", ErrInvalidChildren, mode, record.ModeAll, record.ModeAny)
	}
	anc, err := c.Ancestors(ctx, parent)
	if err != nil {
		return false, err
	}
	envs, err := c.ChildEnvelopes(parent, anc, specs, c.store.Now())
	if err != nil {
		return false, err
	}
	kids := make([]record.Child, len(envs))
	for i, env := range envs {
		b, err := env.marshal()
		if err != nil {
			return false, fmt.Errorf("tasks: children of %s: %w", parent.ID, err)
		}
		kids[i] = record.Child{ID: env.ID, Name: specs[i].Name, Spec: b}
	}
	return c.store.rec.SetChildren(ctx, parent.ID, record.Children{Run: run, Mode: mode, Kids: kids})
}

// SpawnChildren enqueues the children specs of a wait of parent (after
// the wait is stored: record.Store.SetChildren, and the Waiting write),
// each idempotently by its ID (a child that exists already is not
// enqueued again, and is not an error), with parent, root and depth set,
// and returns their IDs in spawn order. A child that exists and has
// ended already is reported to the parent (ReportChildEnd). A parent
// that has ended (canceled) spawns none: an *EndedError. Invalid specs
// wrap ErrInvalidChildren; other errors are Redis's (send again: the
// children enqueued stay, the others are enqueued then, or by the
// children repair).
func (c *Client) SpawnChildren(ctx context.Context, parent *Envelope, specs []ChildSpec) ([]string, error) {
	anc, err := c.Ancestors(ctx, parent)
	if err != nil {
		return nil, err
	}
	envs, err := c.ChildEnvelopes(parent, anc, specs, c.store.Now())
	if err != nil {
		return nil, err
	}
	if st, err := c.store.rdb.HGet(ctx, rkeys.Task(parent.ID), record.FieldState).Result(); err == nil && State(st).Terminal() {
		return nil, &EndedError{ID: parent.ID, State: State(st)} // canceled meanwhile: no children
	}
	ids := make([]string, len(envs))
	for i, env := range envs {
		ids[i] = env.ID
		if err := c.SpawnChild(ctx, env); err != nil {
			return ids, err
		}
	}
	return ids, nil
}

// SpawnChild enqueues child env (an envelope PrepareChildren stored), or
// reports it to its parent when it exists already and has ended (the
// children repair).
func (c *Client) SpawnChild(ctx context.Context, env *Envelope) error {
	res, err := c.enqueueEnvelope(ctx, env, true, 0)
	if err != nil {
		return fmt.Errorf("tasks: spawn child %s of %s: %w", env.ID, env.Parent, err)
	}
	if res.Duplicate && res.State.Terminal() {
		return c.ReportChild(ctx, env.Parent, env.ID)
	}
	return nil
}

// ReportChildEnd writes end, how a child of parent ended, to its parent
// (record.Store.ChildEnded: first write wins) and, when that completes
// the parent's children wait, makes the parent's waiting run pending
// (ResumeRun); a wait of mode any then cancels its children that have
// not ended. Every path that ends a child calls it: the worker's
// success and dead letter (so the deadline sweep's too), Cancel, the
// spawn of a child that had ended, the children repair. A child that is
// not one of the parent's last wait is ignored (nil).
func (c *Client) ReportChildEnd(ctx context.Context, parent string, end ChildEnd) error {
	rs, _, err := c.store.rec.ChildEnded(ctx, parent, end.rec())
	if errors.Is(err, record.ErrNotAChild) {
		return nil
	}
	if err != nil || !rs.Due {
		return err
	}
	if _, err = c.ResumeRun(ctx, parent, rs.Queue, rs.Run); err != nil {
		return err
	}
	if rs.Mode == record.ModeAny {
		c.cancelOpen(ctx, parent, "a child of "+parent+" succeeded, which its wait (mode any) needed")
	}
	return nil
}

// cancelOpen cancels the unended children of parent's last children wait
// (and theirs) with reason, and returns how many tasks it canceled. Best
// effort: a child it misses ends as it would, unheard by the resumed
// parent's wait.
func (c *Client) cancelOpen(ctx context.Context, parent, reason string) int {
	kids, err := c.openChildren(ctx, parent)
	if err != nil {
		return 0
	}
	n := 0
	for _, kid := range kids {
		if r, err := c.Cancel(ctx, kid, reason); err == nil {
			n += 1 + r.Children
		}
	}
	return n
}

// ReportChild reads child's record and, when it has ended, reports its
// end to parent (ReportChildEnd).
func (c *Client) ReportChild(ctx context.Context, parent, child string) error {
	v, err := c.store.rec.Get(ctx, child)
	if err != nil {
		return fmt.Errorf("tasks: report child %s of %s: %w", child, parent, err)
	}
	if !v.State.Terminal() {
		return nil
	}
	return c.ReportChildEnd(ctx, parent, EndOf(v))
}

// EndOf is the end of the child whose record is v.
func EndOf(v *View) ChildEnd {
	end := ChildEnd{ID: v.ID, State: v.State, Result: v.Result, ErrorClass: v.ErrorClass, Error: v.Error}
	return end
}

// ResumeRun makes run of task id, waiting on queue in asynq's scheduled
// set, pending at once (broker.Resume, in its tenant's lane) and wakes an
// idle worker for it: the resume of a waiting task by its children's end
// (and by a signal: the same move). resumed is false when the run was not
// in the scheduled set (its timer moved it already, or another resume
// did): exactly once, as the run is one asynq message.
func (c *Client) ResumeRun(ctx context.Context, id, queue string, run int) (resumed bool, err error) {
	if queue == "" {
		queue = DefaultQueue
	}
	aid := (&Envelope{ID: id, Run: run}).AsynqID()
	ok, err := broker.Resume(ctx, c.store.rdb, queue, aid, time.Now().UnixNano())
	if err != nil {
		return false, fmt.Errorf("tasks: resume %s: %w", aid, err)
	}
	return ok, nil
}

// openChildren are the children of parent's last children wait that
// have not ended (for the cancel cascade).
func (c *Client) openChildren(ctx context.Context, parent string) ([]string, error) {
	ends, err := c.store.rec.ChildEnds(ctx, parent)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ends {
		if !e.State.Terminal() && !slices.Contains(out, e.ID) {
			out = append(out, e.ID)
		}
	}
	return out, nil
}
