-- allow_task admits a task of an agent whose trials are probes. It
-- writes nothing. Needs the prelude.
--
-- KEYS[1] breaker hash.
-- ARGV[1] now ms or "" (Redis TIME), ARGV[2] the retry ms to give when
-- past the cooldown or half-open.
-- Returns allow.lua's layout {allowed 0|1, state, generation, token
-- (always ""), retry_at ms (0 if none), consecutive_failures, retry_in
-- ms (0 if none)}: allowed only in CLOSED; OPEN before open_until is
-- denied until open_until; OPEN past it (the state stays "open" until a
-- probe takes the trial) and HALF_OPEN are denied for ARGV[2] ms.
local now = now_ms(ARGV[1])
local state, gen, cf, ou = load(KEYS[1])
if state == C.closed then return {1, state, gen, '', 0, cf, 0} end
if state == C.open and now < ou then return {0, state, gen, '', ou, cf, ou - now} end
local r = tonumber(ARGV[2])
return {0, state, gen, '', now + r, cf, r}
