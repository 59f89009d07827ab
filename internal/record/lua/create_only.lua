-- create_only.lua: Store.Create.
-- KEYS[1] task record, KEYS[2] history; ARGV[1..9] rec_create's.
-- Returns {R.applied} when the record was created, {R.exists} when it
-- existed (the event is then appended with the next seq).
return {rec_create(KEYS[1], KEYS[2], 1)}
