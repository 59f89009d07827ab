-- status reads a key's usage, read-only. Needs the prelude.
--
-- KEYS as admit.lua's.
-- ARGV[1] now ms or "".
-- Returns {requests, tokens, per_ms, concurrency, starts within the
-- window, tokens within the window, leases live, paused_until ms,
-- paused_reason, deferrals: requests, tokens, concurrency, paused}.
local now = now_ms(ARGV[1])
local h = redis.call('HMGET', KEYS[1], F.requests, F.tokens, F.per_ms, F.concurrency, F.paused_until, F.paused_reason,
  F.deferrals_requests, F.deferrals_tokens, F.deferrals_concurrency, F.deferrals_paused)
local per = tonumber(h[3]) or 0
local starts, used = 0, 0
if per > 0 then
  starts = redis.call('ZCOUNT', KEYS[2], '(' .. (now - per), '+inf')
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '(' .. (now - per), '+inf')) do used = used + debit_of(m) end
end
local live = redis.call('ZCOUNT', KEYS[3], '(' .. now, '+inf')
local pu, why = tonumber(h[5]) or 0, h[6] or ''
if pu <= now then pu, why = 0, '' end
return {tonumber(h[1]) or 0, tonumber(h[2]) or 0, per, tonumber(h[4]) or 0, starts, used, live,
  pu, why, tonumber(h[7]) or 0, tonumber(h[8]) or 0, tonumber(h[9]) or 0, tonumber(h[10]) or 0}
