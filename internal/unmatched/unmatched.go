// Package unmatched keeps the recent failed attempts whose verdict was
// weak (resilience.Verdict.Weak: nothing decided the class, or the learned
// model was unsure) in a Redis stream, rkeys.ClassifyUnmatched, capped
// near MaxLen entries: what `inspector classify --unmatched` lists, so
// that an operator writes a classifier.rules entry for them before they
// happen again. The worker writes an entry for each such failure, best
// effort (Store.Add; a success or a failure decided by stronger evidence
// writes nothing); the inspector reads them newest first (Store.List).
package unmatched

import (
	"context"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/rkeys"
)

// MaxLen is about how many entries the stream keeps (XADD MAXLEN ~).
const MaxLen = 10000

// MaxError bounds an entry's error text in bytes (cut at a character).
const MaxError = 2 << 10

// The stream entry's fields.
const (
	fieldAt           = "at" // Unix ms
	fieldTask         = "task"
	fieldAgent        = "agent"
	fieldAttempt      = "attempt"
	fieldClass        = "class"
	fieldClassifiedBy = "classified_by"
	fieldStatus       = "status"
	fieldError        = "error"
)

// Entry is one failed attempt whose verdict was weak (stable JSON: the
// JSON Lines of `inspector classify --unmatched --json`).
type Entry struct {
	At      time.Time `json:"at"`
	TaskID  string    `json:"task_id"`
	Agent   string    `json:"agent"`
	Attempt int       `json:"attempt"`
	// ErrorClass is the class the verdict gave, ClassifiedBy what decided
	// it (default, or model).
	ErrorClass   string `json:"error_class"`
	ClassifiedBy string `json:"classified_by"`
	// Status is the failure's HTTP status, or an exec agent's
	// ActionResponse code; 0 when it had none.
	Status int `json:"status"`
	// Error is the error text the task's history keeps, cut to MaxError
	// bytes.
	Error string `json:"error"`
}

// Store reads and writes the stream.
type Store struct{ rdb redis.UniversalClient }

// NewStore returns the store on rdb.
func NewStore(rdb redis.UniversalClient) *Store { return &Store{rdb: rdb} }

// Add appends e (one XADD, trimming the stream to about MaxLen entries).
func (s *Store) Add(ctx context.Context, e Entry) error {
	err := s.rdb.XAdd(ctx, &redis.XAddArgs{
		Stream: rkeys.ClassifyUnmatched(), MaxLen: MaxLen, Approx: true,
		Values: []any{fieldAt, e.At.UnixMilli(), fieldTask, e.TaskID, fieldAgent, e.Agent, fieldAttempt, e.Attempt,
			fieldClass, e.ErrorClass, fieldClassifiedBy, e.ClassifiedBy, fieldStatus, e.Status, fieldError, Cut(e.Error, MaxError)},
	}).Err()
	if err != nil {
		return fmt.Errorf("unmatched: add %s: %w", e.TaskID, err)
	}
	return nil
}

// Query selects entries: those at or after Since (zero: all), of Agent
// ("": every agent), at most Limit of them (≤ 0: all).
type Query struct {
	Since time.Time
	Agent string
	Limit int
}

// page is how many entries List reads per XREVRANGE.
const page = 500

// List returns the entries q selects, newest first. It reads the stream
// backwards from its newest entry down to q.Since (stream IDs are the
// server's Unix ms), a page at a time, until q.Limit entries matched.
func (s *Store) List(ctx context.Context, q Query) ([]Entry, error) {
	start := "-"
	if !q.Since.IsZero() {
		start = strconv.FormatInt(max(q.Since.UnixMilli(), 0), 10)
	}
	out := []Entry{}
	end := "+"
	for {
		n := int64(page)
		if q.Agent == "" && q.Limit > 0 {
			n = int64(min(q.Limit-len(out), page))
		}
		msgs, err := s.rdb.XRevRangeN(ctx, rkeys.ClassifyUnmatched(), end, start, n).Result()
		if err != nil {
			return nil, fmt.Errorf("unmatched: list: %w", err)
		}
		for _, m := range msgs {
			e := entryOf(m.Values)
			if (q.Agent == "" || e.Agent == q.Agent) && !e.At.Before(q.Since) {
				out = append(out, e)
			}
			if q.Limit > 0 && len(out) == q.Limit {
				return out, nil
			}
		}
		if int64(len(msgs)) < n {
			return out, nil
		}
		end = "(" + msgs[len(msgs)-1].ID
	}
}

// entryOf reads a stream entry's fields.
func entryOf(v map[string]any) Entry {
	str := func(k string) string { s, _ := v[k].(string); return s }
	num := func(k string) int64 { n, _ := strconv.ParseInt(str(k), 10, 64); return n }
	return Entry{
		At: time.UnixMilli(num(fieldAt)).UTC(), TaskID: str(fieldTask), Agent: str(fieldAgent), Attempt: int(num(fieldAttempt)),
		ErrorClass: str(fieldClass), ClassifiedBy: str(fieldClassifiedBy), Status: int(num(fieldStatus)), Error: str(fieldError),
	}
}

// Cut returns s cut to at most n bytes, at a character's start.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
