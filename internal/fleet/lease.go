package fleet

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/redisx"
)

// MinLease is the shortest lease Every holds a job by: a worker that did
// not win a job's lease claims it again only when the lease it saw has
// run out, so a fleet's idle cost is one claim per worker and lease, and
// the holder's one renewal per half lease.
const MinLease = 5 * time.Second

// releaseTimeout bounds the release of the leases when Every ends.
const releaseTimeout = 2 * time.Second

var (
	scripts       = redisx.NewScripts("fleet", luaFiles, nil)
	claimScript   = scripts.Script("lua/claim.lua")
	releaseScript = scripts.Script("lua/release.lua")
)

//go:embed lua/*.lua
var luaFiles embed.FS

// lease is what Every knows of one job's lease: until when it needs no
// claim (the holder: half its lease; another worker: the holder's lease
// as it saw it), and whether this worker holds it.
type lease struct {
	held  bool
	until time.Time
}

// claimLease takes or keeps key's lease for holder for d (claim.lua): won
// when holder holds it now; else left is the other holder's lease's
// remaining time (≤ 0: it has no expiry).
func claimLease(ctx context.Context, rdb redis.Scripter, key, holder string, d time.Duration) (won bool, left time.Duration, err error) {
	r, err := claimScript.Run(ctx, rdb, []string{key}, holder, d.Milliseconds()).Int64Slice()
	if err != nil {
		return false, 0, fmt.Errorf("fleet: claim %s: %w", key, err)
	}
	if len(r) != 2 {
		return false, 0, fmt.Errorf("fleet: claim %s: reply %v", key, r)
	}
	return r[0] == 1, time.Duration(r[1]) * time.Millisecond, nil
}

// releaseLease deletes key if holder still holds it (release.lua).
func releaseLease(ctx context.Context, rdb redis.Scripter, key, holder string) (bool, error) {
	n, err := releaseScript.Run(ctx, rdb, []string{key}, holder).Int64()
	if err != nil {
		return false, fmt.Errorf("fleet: release %s: %w", key, err)
	}
	return n == 1, nil
}

// holderID is the value an Every's leases hold: the worker's ID (which
// shows who holds one) and a random tag of this Every, so that two
// services of one process (or two workers given one ID) are two holders.
func holderID(worker string) string {
	if worker == "" {
		worker = "1"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return worker + "#" + hex.EncodeToString(b[:])
}

// step decides one job's tick at now from its lease l: claim (ask Redis)
// or not, and if not, run or not.
func (l lease) step(now time.Time) (claim, run bool) {
	if now.Before(l.until) {
		return false, l.held
	}
	return true, false
}

// next is the lease after a claim at now: held for half of d (the holder
// renews it before it can run out), or, when another holder has it,
// skipped for what is left of theirs (d when it has no expiry).
func next(now time.Time, won bool, left, d time.Duration) lease {
	if won {
		return lease{held: true, until: now.Add(d / 2)}
	}
	if left <= 0 {
		left = d
	}
	return lease{until: now.Add(left)}
}
