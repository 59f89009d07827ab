// Package limit is the provider limits shared by the fleet: per limits
// key, a request limit (calls started within any window of Per), a token
// limit (tokens the calls of any window of Per used, debited after each
// call), a concurrency limit (calls in flight, as leases that expire) and
// a fleet-wide pause learnt from a provider's rate-limit headers
// (ExhaustedFor). Every admission is one Lua script on the key's hash tag
// ({limit:KEY}) using the Redis server's TIME, so it holds across
// workers, processes and machines.
//
// See DESIGN.md §2.
package limit
