-- apply.lua: the checked write (Store.Apply).
-- KEYS[1] task record, KEYS[2] history, KEYS[3] webhook outbox, KEYS[4]
-- the webhooks' due set (absent on a Redis Cluster); ARGV: rec_apply's,
-- from ARGV[1].
-- Returns rec_apply's reply.
return rec_apply(KEYS[1], KEYS[2], 0, {KEYS[3], KEYS[4]})
