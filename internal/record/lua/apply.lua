-- apply.lua: the checked write (Store.Apply).
-- KEYS[1] task record, KEYS[2] history, KEYS[3] webhook outbox (absent
-- when the task's seed names no webhook), KEYS[4] the webhooks' due set
-- (absent then and on a Redis Cluster); ARGV: rec_apply's,
-- from ARGV[1].
-- Returns rec_apply's reply.
return rec_apply(KEYS[1], KEYS[2], 0, KEYS[3], KEYS[4])
