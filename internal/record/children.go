package record

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/durx"
	"github.com/agentq/agentq/internal/rkeys"
)

// The modes of a children wait: ModeAll resumes the parent when every
// child has ended, ModeAny at the first child that succeeds (or when
// every child has ended).
const (
	ModeAll = "all"
	ModeAny = "any"
)

// ChildRepairAfter is how long after a children wait is stored the
// children repair first looks at it (and then every ChildRepairAfter
// while the parent waits): the spawn and the children's own ends do the
// work; the repair only finishes what a crash cut.
const ChildRepairAfter = 30 * time.Second

// Child is one child of a children wait: its ID, its name (the spec's,
// "" when none) and Spec, what spawns it (opaque here: package tasks
// writes and reads it, the children repair enqueues it).
type Child struct {
	ID   string
	Name string
	Spec json.RawMessage
}

// Children is a parent's children wait as SetChildren stores it: Run is
// the run that waits for them (the run the Waiting write moves the
// record to), Mode ModeAll or ModeAny, Kids in spawn order.
type Children struct {
	Run  int
	Mode string
	Kids []Child
}

// childSpec is what the child specs hash keeps per child (rkeys.TaskChildSpecs).
type childSpec struct {
	Name string          `json:"name,omitempty"`
	Spec json.RawMessage `json:"spec"`
}

// ChildEnd is how a child ended, as its parent keeps it (the child ends
// hash, rkeys.TaskChildEnds) and hands it to its agent (the
// ActionRequest's children, in spawn order). State is the child's
// terminal state (ChildEnds: its current state when it has not ended).
type ChildEnd struct {
	ID         string          `json:"id"`
	Name       string          `json:"name,omitempty"`
	State      State           `json:"state"`
	Result     json.RawMessage `json:"result,omitempty"`
	ErrorClass string          `json:"error_class"`
	Error      string          `json:"error"`
	// Recorded (ChildEnds) is true when the end is in the parent's child
	// ends: the parent has heard of it.
	Recorded bool `json:"-"`
}

// ErrChildrenRefused is matched (errors.Is) by SetChildren's refusal: a
// ChildrenRefusedError.
var ErrChildrenRefused = errors.New("children wait refused")

// ChildrenRefusedError: SetChildren wrote nothing because the parent's
// record is at a newer run (Stale), has ended or has no record (Ended),
// or was canceled (Canceled).
type ChildrenRefusedError struct {
	ID      string
	Outcome Outcome
}

func (e *ChildrenRefusedError) Error() string {
	return fmt.Sprintf("children wait of %s refused: the task is %s", e.ID, e.Outcome)
}

// Is makes every ChildrenRefusedError match ErrChildrenRefused.
func (e *ChildrenRefusedError) Is(target error) bool { return target == ErrChildrenRefused }

// setChildrenScript is SetChildren, childEndScript ChildEnded (their
// lua files document KEYS, ARGV and replies).
var (
	setChildrenScript = newScript("set_children.lua")
	childEndScript    = newScript("child_end.lua")
)

// SetChildren stores parent's children wait c (before the Waiting write
// that moves the record to c.Run, in the parent's slot): the ordered
// child IDs (View.Children), each child's spec for the children repair,
// and the wait's run and mode on the record; and adds parent to the
// children repair's index (rkeys.WaitingChildren, a separate command: on
// a Cluster another slot), first, so that a crash after it leaves the
// repair a parent to look at. A wait of the same run stored already is
// kept (stored false). A refused wait is a ChildrenRefusedError.
func (s *Store) SetChildren(ctx context.Context, parent string, c Children) (stored bool, err error) {
	due := s.now().Add(ChildRepairAfter).UnixMilli()
	if err := s.rdb.ZAdd(ctx, rkeys.WaitingChildren(), redis.Z{Score: float64(due), Member: parent}).Err(); err != nil {
		return false, fmt.Errorf("record: children of %s: index: %w", parent, err)
	}
	args := make([]any, 0, 3+2*len(c.Kids))
	args = append(args, c.Run, c.Mode, durx.CeilSeconds(s.retention))
	for _, k := range c.Kids {
		spec, err := json.Marshal(childSpec{Name: k.Name, Spec: k.Spec})
		if err != nil {
			return false, fmt.Errorf("record: children of %s: spec of %s: %w", parent, k.ID, err)
		}
		args = append(args, k.ID, string(spec))
	}
	keys := []string{rkeys.Task(parent), rkeys.TaskChildren(parent), rkeys.TaskChildSpecs(parent), rkeys.TaskChildEnds(parent)}
	code, _, err := reply(s.runner.Run(ctx, setChildrenScript, keys, args...))
	if err != nil {
		return false, fmt.Errorf("record: children of %s: %w", parent, err)
	}
	switch code {
	case CodeApplied:
		return true, nil
	case CodeRepeat:
		return false, nil
	case CodeStale:
		return false, &ChildrenRefusedError{ID: parent, Outcome: Stale}
	case CodeCanceled:
		return false, &ChildrenRefusedError{ID: parent, Outcome: Canceled}
	case CodeEnded, CodeMissing:
		return false, &ChildrenRefusedError{ID: parent, Outcome: Ended}
	}
	return false, fmt.Errorf("record: children of %s: unexpected reply code %d", parent, code)
}

// Resume is ChildEnded's answer: when Due, the caller makes the parent's
// Run (on Queue) pending at once (broker.RunNow of its asynq ID in the
// queue's scheduled set, then a wake). Mode is the wait's (ModeAny: the
// caller cancels the children that have not ended).
type Resume struct {
	Due   bool
	Run   int
	Queue string
	Mode  string
}

// ErrNotAChild is ChildEnded's error for a child that is not one of the
// parent's last children wait (or a parent with no record): nothing was
// written.
var ErrNotAChild = errors.New("not a child of the parent's last children wait")

// ChildEnded records end, the end of one of parentID's children, in the
// parent's child ends hash (the first write of a child's end wins:
// recorded is false for a repeat) and says whether the parent resumes
// (see lua/child_end.lua): once per wait, to the one call whose end
// completes the wait. An end with no ID is the children repair's look:
// nothing is written, and the resume is due when the wait is complete,
// or was answered already while the parent still waits. A result over
// MaxStoredResult is kept as the record keeps it (a note of its size). A
// child that is not one of the wait's is ErrNotAChild.
func (s *Store) ChildEnded(ctx context.Context, parentID string, end ChildEnd) (rs Resume, recorded bool, err error) {
	var data []byte
	if len(end.Result) > MaxStoredResult { // as the child's record keeps it
		end.Result, _ = json.Marshal(map[string]any{"truncated": true, "bytes": len(end.Result)})
	}
	if end.ID != "" {
		if data, err = json.Marshal(end); err != nil {
			return Resume{}, false, fmt.Errorf("record: end of child %s: %w", end.ID, err)
		}
	}
	ok := "0"
	if end.State == StateSucceeded {
		ok = "1"
	}
	keys := []string{rkeys.Task(parentID), rkeys.TaskChildSpecs(parentID), rkeys.TaskChildEnds(parentID)}
	code, rest, err := reply(s.runner.Run(ctx, childEndScript, keys, end.ID, string(data), ok, string(StateWaiting),
		`"state":"`+string(StateSucceeded)+`"`))
	if err != nil {
		return Resume{}, false, fmt.Errorf("record: end of child %q of %s: %w", end.ID, parentID, err)
	}
	switch {
	case code == CodeMissing || code == CodeStale:
		return Resume{}, false, fmt.Errorf("%w: %q of %s", ErrNotAChild, end.ID, parentID)
	case len(rest) < 4 || (code != CodeApplied && code != CodeRepeat):
		return Resume{}, false, fmt.Errorf("record: end of child %q of %s: unexpected reply %d %v", end.ID, parentID, code, rest)
	}
	due, _ := rest[0].(int64)
	rs = Resume{Due: due == 1, Queue: fmt.Sprint(rest[2]), Mode: fmt.Sprint(rest[3])}
	rs.Run, _ = strconv.Atoi(fmt.Sprint(rest[1]))
	return rs, code == CodeApplied && end.ID != "", nil
}

// ChildEnds reads the children of parentID's last children wait, in
// spawn order: how each ended, or, for one that has not, its ID, name
// and current state ("" when it has no record yet), in two round trips
// (the second only when some child has not ended).
func (s *Store) ChildEnds(ctx context.Context, parentID string) ([]ChildEnd, error) {
	var ids *redis.StringSliceCmd
	var ends, specs *redis.MapStringStringCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		ids = p.LRange(ctx, rkeys.TaskChildren(parentID), 0, -1)
		ends = p.HGetAll(ctx, rkeys.TaskChildEnds(parentID))
		specs = p.HGetAll(ctx, rkeys.TaskChildSpecs(parentID))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("record: children of %s: %w", parentID, err)
	}
	out := make([]ChildEnd, len(ids.Val()))
	var open []int
	for i, id := range ids.Val() {
		var sp childSpec
		_ = json.Unmarshal([]byte(specs.Val()[id]), &sp)
		out[i] = ChildEnd{ID: id, Name: sp.Name}
		if e, ok := ends.Val()[id]; ok && json.Unmarshal([]byte(e), &out[i]) == nil {
			out[i].Recorded = true
			continue
		}
		open = append(open, i)
	}
	return out, s.fillStates(ctx, out, open)
}

// fillStates sets the state of the children out[i], i in open, from
// their records.
func (s *Store) fillStates(ctx context.Context, out []ChildEnd, open []int) error {
	if len(open) == 0 {
		return nil
	}
	ids := make([]string, len(open))
	for j, i := range open {
		ids[j] = out[i].ID
	}
	states, err := s.States(ctx, ids)
	if err != nil {
		return err
	}
	for j, i := range open {
		out[i].State = states[j]
	}
	return nil
}

// ChildSpecs reads the specs of parentID's last children wait (child ID
// -> spec), for the children repair.
func (s *Store) ChildSpecs(ctx context.Context, parentID string) (map[string]json.RawMessage, error) {
	m, err := s.rdb.HGetAll(ctx, rkeys.TaskChildSpecs(parentID)).Result()
	if err != nil {
		return nil, fmt.Errorf("record: child specs of %s: %w", parentID, err)
	}
	out := make(map[string]json.RawMessage, len(m))
	for id, v := range m {
		var sp childSpec
		if json.Unmarshal([]byte(v), &sp) == nil {
			out[id] = sp.Spec
		}
	}
	return out, nil
}

// Nodes reads the records of tasks ids with their children lists
// (View.Children; no history) in one round trip: nil for a task with no
// record. A tree's view reads it level by level.
func (s *Store) Nodes(ctx context.Context, ids []string) ([]*View, error) {
	hs := make([]*redis.MapStringStringCmd, len(ids))
	ls := make([]*redis.StringSliceCmd, len(ids))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			hs[i] = p.HGetAll(ctx, rkeys.Task(id))
			ls[i] = p.LRange(ctx, rkeys.TaskChildren(id), 0, -1)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("record: nodes: %w", err)
	}
	out := make([]*View, len(ids))
	for i := range ids {
		if m := hs[i].Val(); len(m) > 0 {
			out[i] = viewOf(ids[i], m)
			out[i].Children = ls[i].Val()
		}
	}
	return out, nil
}
