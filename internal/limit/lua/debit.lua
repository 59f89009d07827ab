-- debit debits the tokens a call used. Needs the prelude.
--
-- KEYS[1] state hash, KEYS[4] token debits (KEYS as admit.lua's).
-- ARGV[1] now ms or "", ARGV[2] per ms, ARGV[3] tokens (> 0).
-- Returns the tokens used within the window.
local now, per, n = now_ms(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
prune_tokens(KEYS[1], KEYS[4], now, per)
local seq = redis.call('HINCRBY', KEYS[1], F.seq, 1)
redis.call('ZADD', KEYS[4], now, seq .. ':' .. n)
redis.call('PEXPIRE', KEYS[4], per)
return redis.call('HINCRBY', KEYS[1], F.tokens_used, n)
