package redisx

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// temporaryReplies are the error-reply codes that mean "not now". Each is
// matched with a trailing space.
var temporaryReplies = []string{
	"LOADING", "READONLY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "BUSY", "NOREPLICAS", "UNBLOCKED",
}

// maxClients is the whole reply of a server at maxclients.
const maxClients = "ERR max number of clients reached"

// IsUnavailable reports whether err says Redis is temporarily unable to
// answer, so that the same command may succeed later. nil is not
// unavailable.
//
// IsUnavailable is the narrow, temporary answer: retrying the same command
// later can succeed without anyone changing anything. Unanswered is the
// broader answer for callers that only need to know that Redis did not give
// a definite reply (the breaker falls back to its last seen state for any of
// them).
//
// Decisions, one per kind of error:
//
//   - Network errors (any net.Error: *net.OpError, dial and i/o timeouts,
//     DNS errors), ECONNREFUSED, ECONNRESET, ECONNABORTED, EPIPE, io.EOF,
//     io.ErrUnexpectedEOF and net.ErrClosed ("use of closed network
//     connection"): unavailable. The server is down, restarting, failing
//     over or unreachable.
//   - redis.ErrPoolTimeout and redis.ErrPoolExhausted: unavailable (every
//     connection is busy or stuck on a server that does not answer).
//   - context.DeadlineExceeded: unavailable. Redis did not answer within the
//     call's deadline; go-redis reports a dial that timed out this way.
//   - context.Canceled: NOT unavailable, even when wrapped in a net.OpError.
//     The caller gave up; that says nothing about Redis, and a retry loop
//     that treated it as unavailable would turn a cancel into a wait. (A
//     loop must still check its own ctx: a deadline on the caller's ctx is
//     reported as DeadlineExceeded, which is unavailable.)
//   - redis.ErrClosed ("redis: client is closed"): NOT unavailable, since
//     this process closed its own client and it will never answer again.
//     Unanswered reports it.
//   - Error replies, matched on their first word (after a leading "ERR ",
//     which KVRocks adds, as redis.HasErrorPrefix does), followed by a space
//     so that BUSYKEY and BUSYGROUP are not BUSY:
//     LOADING (the dataset is being loaded after a restart),
//     READONLY (a write reached a replica: a failover is under way or the
//     client points at a demoted master),
//     MASTERDOWN (a replica with replica-serve-stale-data no lost its master),
//     CLUSTERDOWN (the cluster is not serving the slot),
//     TRYAGAIN (a multi-key command during a slot migration),
//     BUSY (a script or function is running past busy-reply-threshold),
//     NOREPLICAS (min-replicas-to-write is not met: the master lost its
//     replicas, as in a partition or failover),
//     UNBLOCKED (a blocking command was released because the instance
//     changed role) and "ERR max number of clients reached" (the server is
//     overloaded; go-redis retries it too): unavailable. Redis before 7
//     wraps an error raised inside a script as
//     "ERR Error running script …: -READONLY …"; that "-CODE " is matched
//     as well.
//   - Every other reply (WRONGTYPE, NOSCRIPT, ERR syntax, a script's own
//     error, OOM, NOAUTH, WRONGPASS, NOPERM, MOVED, ASK, EXECABORT,
//     redis.Nil): NOT unavailable. OOM needs an operator (maxmemory), the
//     auth errors a config change, and go-redis follows MOVED and ASK
//     itself. These are the answers Redis gave.
//
// A reply is recognised only as a redis.Error (errors.As), so errors must
// be wrapped with %w to keep their class; a plain errors.New("LOADING …")
// is not a reply.
func IsUnavailable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		return TemporaryReply(rerr)
	}
	if errors.Is(err, redis.ErrClosed) {
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) ||
		errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrPoolExhausted)
}

// Unanswered reports whether Redis gave no definite answer: err is
// unavailable (IsUnavailable) or is not a Redis error reply at all (a
// closed client, a canceled context, any other client-side failure). Only
// a reply outside the temporary ones (a script bug, WRONGTYPE, …) is an
// answer. The circuit breaker uses it: whatever kept it from reading the
// shared state, it falls back to the last state it saw.
func Unanswered(err error) bool {
	if err == nil {
		return false
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		return TemporaryReply(rerr)
	}
	return true
}

// TemporaryReply reports whether err is a Redis error reply whose code is
// one of the temporary ones (LOADING, READONLY, …; see the package
// documentation).
func TemporaryReply(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := rerr.Error()
	if msg == maxClients {
		return true
	}
	scriptErr := strings.HasPrefix(msg, "ERR Error running script")
	msg = strings.TrimPrefix(msg, "ERR ")
	for _, code := range temporaryReplies {
		if strings.HasPrefix(msg, code+" ") || (scriptErr && strings.Contains(msg, ": -"+code+" ")) {
			return true
		}
	}
	return false
}

// TxErr is the error of a MULTI/EXEC pipeline (TxPipelined's cmds and
// err): when EXEC aborted (EXECABORT) because a queued command was
// refused, the first refused command's error — LOADING after a restart is
// unavailable (IsUnavailable), a syntax error is not — else err.
func TxErr(cmds []redis.Cmder, err error) error {
	var rerr redis.Error
	if err == nil || !errors.As(err, &rerr) || !strings.HasPrefix(rerr.Error(), "EXECABORT") {
		return err
	}
	for _, c := range cmds {
		if cerr := c.Err(); cerr != nil && TemporaryReply(cerr) {
			return cerr
		}
	}
	return err
}
