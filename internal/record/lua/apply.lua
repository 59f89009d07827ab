-- apply.lua: the checked write (Store.Apply).
-- KEYS[1] task record, KEYS[2] history; ARGV: rec_apply's, from ARGV[1].
-- Returns rec_apply's reply.
return rec_apply(KEYS[1], KEYS[2], 0)
