package record

// What is behind package tasks' public types. Package tasks sets these
// hooks (SetBehind, in its init) so that agentq's own packages reach the
// record's writer behind a *tasks.Store and the seed of a *tasks.Envelope,
// while tasks' exported API names no internal type (internal/lint
// TestPublicAPINamesNoInternalType). Their argument is `any` because the
// record is below tasks: it cannot name tasks' types.
var (
	storeBehind func(any) *Store
	seedBehind  func(any) Seed
)

// SetBehind sets the hooks StoreOf and SeedOf call (package tasks, once).
func SetBehind(store func(any) *Store, seed func(any) Seed) {
	storeBehind, seedBehind = store, seed
}

// StoreOf returns the record store behind s, a *tasks.Store: the writer
// agentq's own packages use.
func StoreOf(s any) *Store { return storeBehind(s) }

// SeedOf returns the part of env's record (env is a *tasks.Envelope) that
// enqueueing it writes.
func SeedOf(env any) Seed { return seedBehind(env) }
