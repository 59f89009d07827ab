-- used reads the tokens debited within a window, read-only. Needs the
-- prelude.
--
-- KEYS[4] token debits (KEYS as admit.lua's).
-- ARGV[1] now ms or "", ARGV[2] per ms.
-- Returns {tokens debited within the last per, ms until the oldest of
-- them leaves the window (0: none)}.
local now, per = now_ms(ARGV[1]), tonumber(ARGV[2])
local used, first = 0, 0
for i, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '(' .. (now - per), '+inf', 'WITHSCORES')) do
  if i % 2 == 1 then used = used + debit_of(m) elseif first == 0 then first = tonumber(m) + per - now end
end
return {used, first}
