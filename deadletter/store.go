package deadletter

import (
	"context"
	crand "crypto/rand"
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/defaults"
	"github.com/agentq/agentq/internal/redisx"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/internal/startstop"
)

// DefaultLimit is the page size List uses when Filter.Limit is zero or
// negative; MaxLimit caps larger ones.
const (
	DefaultLimit = 100
	MaxLimit     = 10000
)

// pageSize is how many entries Export and IDs read per round trip.
const pageSize = 500

// maxCASRetries bounds the compare-and-set loops of Put, Delete and Purge.
// A retry means another writer moved the same entry to another agent or
// class in between; from the third try on, the loop waits a little
// (randomized, growing to at most 25 ms) so that contending writers spread
// out even on a starved machine (8 writers of one ID beside stress-ng ran
// out of 64 tries when the wait grew to only 2 ms, and once more with 64
// tries growing to 10 ms): at most a few seconds in all, for a loop that
// almost always ends on its first try.
const maxCASRetries = 256

// casBackoff waits before try number try (from 0) of a compare-and-set loop.
func casBackoff(ctx context.Context, try int) error {
	if try < 2 {
		return ctx.Err()
	}
	return startstop.Sleep(ctx, time.Duration(rand.Int64N(int64(min(try, 50))*int64(500*time.Microsecond))))
}

// errConflict is returned (wrapped) when a compare-and-set loop ran out of
// retries.
var errConflict = errors.New("dead letter changed concurrently too many times")

// Store is the Redis dead-letter store. It is safe for concurrent use; many
// processes may share one store.
type Store struct {
	rdb    redis.UniversalClient
	now    func() time.Time
	writes redisx.Runner // runs Put's script: redisx.Direct, or WithWaitReplicas'
}

// Option configures a Store.
type Option func(*Store)

// WithClock sets the clock Put reads when an entry's DeadLetteredAt is zero.
// Nil (the default) means time.Now.
func WithClock(now func() time.Time) Option {
	return func(s *Store) {
		if now != nil {
			s.now = now
		}
	}
}

// WithWaitReplicas makes Put's writes wait until n replicas have them
// (Redis WAIT, each at most timeout; zero: 1s), as the worker's
// redis.wait_replicas asks. onShort, when not nil, makes a wait that ends
// short best-effort: it gets the error and Put's outcome, which is on the
// master, stands; when nil, Put fails. Without it (the default) each write
// is one plain round trip.
func WithWaitReplicas(n int, timeout time.Duration, onShort func(error)) Option {
	return func(s *Store) {
		s.writes = redisx.Replicated(s.rdb, redisx.Replication{Replicas: n, Timeout: timeout, OnShort: onShort})
	}
}

// NewStore returns a store on rdb.
func NewStore(rdb redis.UniversalClient, opts ...Option) *Store {
	s := &Store{rdb: rdb, now: time.Now}
	for _, o := range opts {
		o(s)
	}
	if s.writes == nil {
		s.writes = redisx.Direct(rdb)
	}
	return s
}

// Filter selects dead letters. The zero value selects all of them.
type Filter struct {
	// Agent, when set, keeps the entries of that agent only.
	Agent string
	// Class, when set, keeps the entries of that error class only. With
	// Agent also set, both must match.
	Class string
	// Offset skips that many entries of the newest-first order (List only;
	// negative means zero).
	Offset int
	// Limit is List's page size: zero or negative means DefaultLimit,
	// larger than MaxLimit means MaxLimit. Export and IDs ignore it.
	Limit int
	// Through, when set, keeps the entries dead-lettered at or before it
	// (to the millisecond; Export and IDs only): the set a confirmation
	// counted, without those that came after.
	Through time.Time
}

// indexKeys returns the index to read and, when both Agent and Class are
// set, the second one to intersect it with ("" otherwise).
func (f Filter) indexKeys() (primary, secondary string) {
	f.Agent, f.Class = jsonCoerce(f.Agent), jsonCoerce(f.Class)
	switch {
	case f.Agent != "" && f.Class != "":
		return rkeys.DLQByAgent(f.Agent), rkeys.DLQByClass(f.Class)
	case f.Agent != "":
		return rkeys.DLQByAgent(f.Agent), ""
	case f.Class != "":
		return rkeys.DLQByClass(f.Class), ""
	default:
		return rkeys.DLQIndex(), ""
	}
}

// indexRef is the agent and class of a stored entry: the index keys it is
// in. The DLQRefs hash keeps it per ID (encoded by refString, decoded by
// lua/ref.lua), so scripts find an entry's index keys without decoding its JSON;
// the Go side passes the keys it expects, so scripts only touch declared keys.
type indexRef struct {
	Agent      string
	ErrorClass string
}

// refString encodes r for the DLQRefs hash: "<len(agent)>:<agent><class>".
func refString(r indexRef) string {
	return strconv.Itoa(len(r.Agent)) + ":" + r.Agent + r.ErrorClass
}

// noRef is a guess that matches no stored entry: it makes a script report
// the entry's actual agent and class.
var noRef = indexRef{Agent: "\x00?", ErrorClass: "\x00?"}

// The modes of putScript (does the caller expect an entry?) and
// listScript (one index, or two intersected), rendered into the scripts
// as C.absent, C.present, C.one and C.both.
const (
	putAbsent  = "absent"
	putPresent = "present"
	listOne    = "one"
	listBoth   = "both"
)

// scripts are the store's Lua (lua/*.lua).
var scripts = redisx.NewScripts("deadletter", luaFiles, map[string]map[string]string{
	"C": redisx.Literals(map[string]any{"absent": putAbsent, "present": putPresent, "one": listOne, "both": listBoth}),
})

//go:embed lua/*.lua
var luaFiles embed.FS

// jsonCoerce returns s as encoding/json stores it (invalid UTF-8 bytes
// replaced by U+FFFD).
func jsonCoerce(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	b, _ := json.Marshal(s)
	_ = json.Unmarshal(b, &s)
	return s
}

func refOf(e *Entry) indexRef { return indexRef{Agent: e.Agent, ErrorClass: e.ErrorClass} }

func score(e *Entry) string { return strconv.FormatInt(e.DeadLetteredAt.UnixMilli(), 10) }

// putScript stores an entry's body and indexes it, or moves a stored one
// between indexes (lua/put.lua documents its KEYS, ARGV and replies).
var putScript = scripts.Script("lua/ref.lua", "lua/put.lua")

// putArgs builds putScript's keys and args; old nil means "absent".
func putArgs(e *Entry, body []byte, old *indexRef) (keys []string, args []any) {
	mode, o := putAbsent, refOf(e)
	if old != nil {
		mode, o = putPresent, *old
	}
	keys = []string{
		rkeys.DLQEntries(), rkeys.DLQIndex(), rkeys.DLQIndexes(),
		rkeys.DLQByAgent(e.Agent), rkeys.DLQByClass(e.ErrorClass),
		rkeys.DLQByAgent(o.Agent), rkeys.DLQByClass(o.ErrorClass), rkeys.DLQRefs(),
	}
	return keys, []any{e.ID, body, score(e), mode, o.Agent, o.ErrorClass, refString(refOf(e))}
}

// parseRef reads the {code, agent, class} replies of putScript and
// deleteScript: ref is nil when the reply has no agent and class.
func parseRef(op string, v any) (code int64, ref *indexRef, err error) {
	arr, ok := v.([]any)
	if !ok || len(arr) == 0 {
		return 0, nil, fmt.Errorf("deadletter: %s: unexpected reply %T %v", op, v, v)
	}
	code, _ = arr[0].(int64)
	if len(arr) == 3 {
		a, _ := arr[1].(string)
		c, _ := arr[2].(string)
		ref = &indexRef{Agent: a, ErrorClass: c}
	}
	return code, ref, nil
}

// prepare validates e, stamps DeadLetteredAt when zero and encodes it.
func (s *Store) prepare(e *Entry) ([]byte, error) {
	if err := e.Validate(); err != nil {
		return nil, err
	}
	if e.DeadLetteredAt.IsZero() {
		e.DeadLetteredAt = s.now()
	}
	// The index keys must name what the stored JSON says: JSON coerces
	// invalid UTF-8, so coerce the index fields the same way first.
	e.Agent, e.ErrorClass = jsonCoerce(e.Agent), jsonCoerce(e.ErrorClass)
	body, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("deadletter: encode %s: %w", e.ID, err)
	}
	return body, nil
}

// Put stores e, indexed by DeadLetteredAt (milliseconds; set from the
// store's clock when zero, which updates e), by agent and by error class.
// It is idempotent per ID: putting an ID that is already stored replaces its
// body (and moves it between agent and class indexes if those changed)
// without adding a second entry; created says whether the ID was new.
func (s *Store) Put(ctx context.Context, e *Entry) (created bool, err error) {
	body, err := s.prepare(e)
	if err != nil {
		return false, err
	}
	return s.put(ctx, e, body, nil)
}

// put runs the compare-and-set loop of Put starting from the guess old
// (nil: no entry yet).
func (s *Store) put(ctx context.Context, e *Entry, body []byte, old *indexRef) (bool, error) {
	for try := range maxCASRetries {
		if err := casBackoff(ctx, try); err != nil {
			return false, fmt.Errorf("deadletter: put %s: %w", e.ID, err)
		}
		keys, args := putArgs(e, body, old)
		v, err := s.writes.Run(ctx, putScript, keys, args...)
		if err != nil {
			return false, fmt.Errorf("deadletter: put %s: %w", e.ID, err)
		}
		code, ref, err := parseRef("put", v)
		if err != nil {
			return false, err
		}
		if code >= 0 {
			return code == 1, nil
		}
		old = ref
	}
	return false, fmt.Errorf("deadletter: put %s: %w", e.ID, errConflict)
}

// putManyScript stores a batch of new entries, leaving stored IDs alone
// (lua/put_many.lua documents its KEYS, ARGV and replies).
var putManyScript = scripts.Script("lua/put_many.lua")

// putManyBatch is how many entries one putManyScript call stores: small
// enough that one script run stays short on a busy server.
const putManyBatch = 200

// PutMany stores entries like Put, a batch per script run, so that bulk
// imports cost few round trips. It returns how many IDs were new. Entries
// are validated (and stamped) before anything is written; on a Redis
// error, some entries may have been stored (each completely or not at all).
func (s *Store) PutMany(ctx context.Context, entries []*Entry) (created int, err error) {
	bodies := make([][]byte, len(entries))
	for i, e := range entries {
		if bodies[i], err = s.prepare(e); err != nil {
			return 0, err
		}
	}
	for start := 0; start < len(entries); start += putManyBatch {
		batch := entries[start:min(start+putManyBatch, len(entries))]
		keys := make([]string, 0, 4+2*len(batch))
		keys = append(keys, rkeys.DLQEntries(), rkeys.DLQIndex(), rkeys.DLQIndexes(), rkeys.DLQRefs())
		args := make([]any, 0, 4*len(batch))
		for j, e := range batch {
			keys = append(keys, rkeys.DLQByAgent(e.Agent), rkeys.DLQByClass(e.ErrorClass))
			args = append(args, e.ID, bodies[start+j], score(e), refString(refOf(e)))
		}
		codes, err := putManyScript.Run(ctx, s.rdb, keys, args...).Int64Slice()
		if err != nil {
			return created, fmt.Errorf("deadletter: put: %w", err)
		}
		if len(codes) != len(batch) {
			return created, fmt.Errorf("deadletter: put: %d replies for %d entries", len(codes), len(batch))
		}
		for j, code := range codes {
			if code == 1 {
				created++
				continue
			}
			// Already stored: replace it (the first guess is "absent", so
			// the script reports the stored agent and class).
			c, err := s.put(ctx, batch[j], bodies[start+j], nil)
			if err != nil {
				return created, err
			}
			if c {
				created++
			}
		}
	}
	return created, nil
}

// Get returns the dead letter id, or an error wrapping ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (*Entry, error) {
	e, _, err := s.get(ctx, id)
	return e, err
}

// get returns the entry and its stored body.
func (s *Store) get(ctx context.Context, id string) (*Entry, string, error) {
	body, err := s.rdb.HGet(ctx, rkeys.DLQEntries(), id).Result()
	if errors.Is(err, redis.Nil) {
		return nil, "", fmt.Errorf("deadletter: %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, "", fmt.Errorf("deadletter: get %q: %w", id, err)
	}
	e, err := decode(id, body)
	return e, body, err
}

func decode(id, body string) (*Entry, error) {
	var e Entry
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		return nil, fmt.Errorf("deadletter: decode %q: %w", id, err)
	}
	return &e, nil
}

// listScript reads one page of an index, newest first, with the bodies.
// (lua/list.lua documents its KEYS, ARGV and replies).
var listScript = scripts.Script("lua/list.lua")

type item struct {
	id    string
	score float64
	body  string
}

// page reads count entries of f's index scored at most maxArg ("+inf" or a
// number), skipping offset of them.
func (s *Store) page(ctx context.Context, f Filter, maxArg string, offset, count int, bodies bool) ([]item, int64, error) {
	primary, secondary := f.indexKeys()
	mode := listOne
	if secondary != "" {
		mode = listBoth
	} else {
		secondary = primary
	}
	withBodies := "0"
	if bodies {
		withBodies = "1"
	}
	keys := []string{rkeys.DLQEntries(), primary, secondary, rkeys.DLQScratch()}
	v, err := listScript.Run(ctx, s.rdb, keys, mode, maxArg, offset, count, withBodies).Result()
	if err != nil {
		return nil, 0, fmt.Errorf("deadletter: list: %w", err)
	}
	arr, ok := v.([]any)
	if !ok || len(arr) == 0 || (len(arr)-1)%3 != 0 {
		return nil, 0, fmt.Errorf("deadletter: list: unexpected reply %T", v)
	}
	total, _ := arr[0].(int64)
	items := make([]item, 0, (len(arr)-1)/3)
	for i := 1; i < len(arr); i += 3 {
		id, _ := arr[i].(string)
		sc, _ := arr[i+1].(string)
		score, err := strconv.ParseFloat(sc, 64)
		if err != nil {
			return nil, 0, fmt.Errorf("deadletter: list: score %q of %q: %w", sc, id, err)
		}
		body, _ := arr[i+2].(string)
		items = append(items, item{id: id, score: score, body: body})
	}
	return items, total, nil
}

// List returns one page of the dead letters f selects, newest first, and
// how many f selects in all. Filtering by agent and class together
// intersects both indexes in one script (linear in the smaller index).
func (s *Store) List(ctx context.Context, f Filter) (entries []*Entry, total int64, err error) {
	limit := min(defaults.Positive(f.Limit, DefaultLimit), MaxLimit)
	items, total, err := s.page(ctx, f, "+inf", max(f.Offset, 0), limit, true)
	if err != nil {
		return nil, 0, err
	}
	entries = make([]*Entry, 0, len(items))
	for _, it := range items {
		if it.body == "" {
			continue
		}
		e, err := decode(it.id, it.body)
		if err != nil {
			return nil, 0, err
		}
		entries = append(entries, e)
	}
	return entries, total, nil
}

// scan calls fn for every entry f selects, newest first, reading pageSize
// entries per round trip. It pages by score (keyset), not by offset, so
// dead letters added while it runs (which are newer) shift nothing.
// Offset and Limit of f are ignored.
func (s *Store) scan(ctx context.Context, f Filter, bodies bool, fn func(it item) error) error {
	maxArg, skip := "+inf", 0
	if !f.Through.IsZero() {
		maxArg = strconv.FormatInt(f.Through.UnixMilli(), 10)
	}
	var maxScore float64
	first := true
	for {
		items, _, err := s.page(ctx, f, maxArg, skip, pageSize, bodies)
		if err != nil {
			return err
		}
		for _, it := range items {
			if bodies && it.body == "" {
				continue
			}
			if err := fn(it); err != nil {
				return err
			}
		}
		if len(items) < pageSize {
			return nil
		}
		last := items[len(items)-1].score
		if !first && last == maxScore {
			// The whole page shares the score of the previous bound.
			skip += len(items)
		} else {
			skip = 0
			for i := len(items) - 1; i >= 0 && items[i].score == last; i-- {
				skip++
			}
		}
		maxScore, maxArg, first = last, strconv.FormatFloat(last, 'f', -1, 64), false
	}
}

// Export writes every dead letter f selects (ignoring f.Offset and
// f.Limit) to w as JSON Lines, newest first, reading page by page. It
// returns how many lines it wrote.
func (s *Store) Export(ctx context.Context, w io.Writer, f Filter) (int, error) {
	n := 0
	err := s.scan(ctx, f, true, func(it item) error {
		if _, err := io.WriteString(w, it.body+"\n"); err != nil {
			return fmt.Errorf("deadletter: export: %w", err)
		}
		n++
		return nil
	})
	return n, err
}

// IDs returns the IDs of every dead letter f selects (ignoring f.Offset and
// f.Limit), newest first.
func (s *Store) IDs(ctx context.Context, f Filter) ([]string, error) {
	var ids []string
	err := s.scan(ctx, f, false, func(it item) error {
		ids = append(ids, it.id)
		return nil
	})
	return ids, err
}

// Count returns the number of dead letters.
func (s *Store) Count(ctx context.Context) (int64, error) {
	n, err := s.rdb.HLen(ctx, rkeys.DLQEntries()).Result()
	if err != nil {
		return 0, fmt.Errorf("deadletter: count: %w", err)
	}
	return n, nil
}

// CountBy returns the number of dead letters per agent and per error class
// (entries without an agent or class count under "").
func (s *Store) CountBy(ctx context.Context) (byAgent, byClass map[string]int64, err error) {
	keys, err := s.rdb.SMembers(ctx, rkeys.DLQIndexes()).Result()
	if err != nil {
		return nil, nil, fmt.Errorf("deadletter: count by: %w", err)
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.IntCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.ZCard(ctx, k)
	}
	if len(keys) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, nil, fmt.Errorf("deadletter: count by: %w", err)
		}
	}
	byAgent, byClass = map[string]int64{}, map[string]int64{}
	agentPrefix, classPrefix := rkeys.DLQByAgent(""), rkeys.DLQByClass("")
	for i, k := range keys {
		n := cmds[i].Val()
		if n == 0 {
			continue
		}
		if name, ok := strings.CutPrefix(k, agentPrefix); ok {
			byAgent[name] += n
		} else if name, ok := strings.CutPrefix(k, classPrefix); ok {
			byClass[name] += n
		}
	}
	return byAgent, byClass, nil
}

// deleteScript removes an entry and its index memberships if the caller's
// guess holds (lua/delete.lua documents its KEYS, ARGV and replies).
var deleteScript = scripts.Script("lua/ref.lua", "lua/delete.lua")

// deleteIf removes id, starting from the guess ref, if its body is body
// ("" for any) and, when claim is not "", no other requeue holds its
// requeue claim (releasing claim): 1 deleted, 0 absent, -2 body changed,
// -3 claimed by another requeue.
func (s *Store) deleteIf(ctx context.Context, id, body, claim string, ref indexRef) (int64, error) {
	for try := range maxCASRetries {
		if err := casBackoff(ctx, try); err != nil {
			return 0, fmt.Errorf("deadletter: delete %q: %w", id, err)
		}
		keys := []string{
			rkeys.DLQEntries(), rkeys.DLQIndex(), rkeys.DLQIndexes(),
			rkeys.DLQByAgent(ref.Agent), rkeys.DLQByClass(ref.ErrorClass), rkeys.DLQRefs(), rkeys.DLQRequeueClaim(id),
		}
		v, err := deleteScript.Run(ctx, s.rdb, keys, id, ref.Agent, ref.ErrorClass, body, claim).Result()
		if err != nil {
			return 0, fmt.Errorf("deadletter: delete %q: %w", id, err)
		}
		code, actual, err := parseRef("delete", v)
		if err != nil {
			return 0, err
		}
		if code != -1 || actual == nil {
			return code, nil
		}
		ref = *actual
	}
	return 0, fmt.Errorf("deadletter: delete %q: %w", id, errConflict)
}

// Delete removes the given dead letters, each with all its index
// memberships in one atomic step, and returns how many existed. Unknown
// IDs are not an error.
func (s *Store) Delete(ctx context.Context, ids ...string) (int, error) {
	deleted := 0
	for _, id := range ids {
		n, err := s.deleteIf(ctx, id, "", "", noRef)
		if err != nil {
			return deleted, err
		}
		if n == 1 {
			deleted++
		}
	}
	return deleted, nil
}

// purgeScript deletes every dead-letter key, provided the caller named
// (lua/purge.lua documents its KEYS, ARGV and replies).
var purgeScript = scripts.Script("lua/purge.lua")

// Purge deletes every dead letter and every index, atomically, and returns
// how many entries there were.
func (s *Store) Purge(ctx context.Context) (int64, error) {
	for try := range maxCASRetries {
		if err := casBackoff(ctx, try); err != nil {
			return 0, fmt.Errorf("deadletter: purge: %w", err)
		}
		idx, err := s.rdb.SMembers(ctx, rkeys.DLQIndexes()).Result()
		if err != nil {
			return 0, fmt.Errorf("deadletter: purge: %w", err)
		}
		keys := append([]string{rkeys.DLQEntries(), rkeys.DLQIndex(), rkeys.DLQIndexes(), rkeys.DLQScratch(), rkeys.DLQRefs()}, idx...)
		n, err := purgeScript.Run(ctx, s.rdb, keys).Int64()
		if err != nil {
			return 0, fmt.Errorf("deadletter: purge: %w", err)
		}
		if n >= 0 {
			return n, nil
		}
	}
	return 0, fmt.Errorf("deadletter: purge: %w", errConflict)
}

// ErrConflict is wrapped by the error of a requeue that lost to another
// one (a *ConflictError): the dead letter is being requeued by another
// caller, it changed since it was read (requeued and dead-lettered
// again), or it is not the run the caller named. Nothing was written.
var ErrConflict = errors.New("dead letter requeue conflict")

// ConflictError is Requeue's error for a requeue that must not go ahead
// (nothing was written). Run is the dead letter's run when it is not the
// one the caller named (Want), else -1.
type ConflictError struct {
	ID        string
	Run, Want int
	// InProgress: another requeue holds the dead letter's claim.
	InProgress bool
}

func (e *ConflictError) Error() string {
	switch {
	case e.InProgress:
		return fmt.Sprintf("dead letter %q is being requeued by another request", e.ID)
	case e.Run >= 0:
		return fmt.Sprintf("dead letter %q is run %d, not run %d: it was requeued and dead-lettered again since", e.ID, e.Run, e.Want)
	}
	return fmt.Sprintf("dead letter %q changed while it was being requeued (requeued and dead-lettered again?)", e.ID)
}

// Unwrap makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Unwrap() error { return ErrConflict }

// AnyRun, as Requeue's run, requeues the dead letter whatever its run.
const AnyRun = -1

// claimTTL is how long a requeue's claim on a dead letter lasts: far
// longer than its enqueue and record writes; a requeuer that dies holding
// it blocks other requeues of that dead letter for this long at most.
const claimTTL = time.Minute

// claimScript claims a dead letter for one requeue (lua/claim.lua documents its KEYS, ARGV and replies).
var claimScript = scripts.Script("lua/claim.lua")

// releaseScript gives a requeue's claim back (its enqueue failed;
// lua/release.lua documents its KEYS, ARGV and replies).
var releaseScript = scripts.Script("lua/release.lua")

// claim takes dead letter e (read as body) for one requeue and returns
// the claim's token.
func (s *Store) claim(ctx context.Context, e *Entry, body string) (string, error) {
	var b [12]byte
	_, _ = crand.Read(b[:])
	token := hex.EncodeToString(b[:])
	sum := sha1.Sum([]byte(body))
	n, err := claimScript.Run(ctx, s.rdb, []string{rkeys.DLQEntries(), rkeys.DLQRequeueClaim(e.ID)},
		e.ID, hex.EncodeToString(sum[:]), token, claimTTL.Milliseconds()).Int64()
	switch {
	case err != nil:
		return "", fmt.Errorf("deadletter: requeue %q: claim: %w", e.ID, err)
	case n == 0:
		return "", fmt.Errorf("deadletter: %q: %w", e.ID, ErrNotFound)
	case n == -1:
		return "", &ConflictError{ID: e.ID, Run: -1, InProgress: true}
	case n == -2:
		return "", &ConflictError{ID: e.ID, Run: -1}
	}
	return token, nil
}

// Requeue hands the dead letter id to enqueue (the caller owns the queue
// client, and gives the task a fresh budget there) and, once enqueue
// succeeds, removes the entry, returning it. It is RequeueRun with AnyRun.
func (s *Store) Requeue(ctx context.Context, id string, enqueue func(ctx context.Context, e *Entry) error) (*Entry, error) {
	return s.RequeueRun(ctx, id, AnyRun, enqueue)
}

// RequeueRun is Requeue of dead letter id provided it is run run (AnyRun:
// any): the run a caller saw (the console's button, `inspector dlq
// requeue --run`), so that a late click does not requeue the task's next
// dead letter. Of concurrent requeues of one dead letter exactly one goes
// ahead: it claims the entry (claimScript) before enqueue is called, and
// only the holder of the claim removes it.
//
//   - Unknown id: an error wrapping ErrNotFound; enqueue is not called.
//   - Another requeue holds the entry, the entry changed since it was
//     read, or it is not run run: a *ConflictError (ErrConflict);
//     enqueue is not called and nothing is written.
//   - enqueue fails: its error, wrapped; the entry stays (nothing is lost)
//     and the claim is given back.
//   - The entry changed while enqueue ran (the task was dead-lettered
//     again, or replaced): the newer entry is kept; the requeue still
//     counts as done.
//   - Removing fails after enqueue succeeded: the entry and an error; the
//     task is queued and its dead letter is still listed (its claim
//     expires after a minute; a later requeue of it finds the run queued
//     already).
func (s *Store) RequeueRun(ctx context.Context, id string, run int, enqueue func(ctx context.Context, e *Entry) error) (*Entry, error) {
	e, body, err := s.get(ctx, id)
	if err != nil {
		return nil, err
	}
	if run != AnyRun && e.Run != run {
		return nil, &ConflictError{ID: id, Run: e.Run, Want: run}
	}
	token, err := s.claim(ctx, e, body)
	if err != nil {
		return nil, err
	}
	if err := enqueue(ctx, e); err != nil {
		_ = releaseScript.Run(context.WithoutCancel(ctx), s.rdb, []string{rkeys.DLQRequeueClaim(id)}, token).Err()
		return nil, fmt.Errorf("deadletter: requeue %q: enqueue: %w", id, err)
	}
	n, err := s.deleteIf(ctx, id, body, token, refOf(e))
	switch {
	case err != nil:
		return e, fmt.Errorf("deadletter: requeue %q: enqueued but not removed: %w", id, err)
	case n == -3:
		// The claim expired while enqueue ran and another requeue took
		// it: that one removes the entry.
		return e, fmt.Errorf("deadletter: requeue %q: enqueued but not removed: %w", id, &ConflictError{ID: id, Run: -1, InProgress: true})
	}
	return e, nil
}
