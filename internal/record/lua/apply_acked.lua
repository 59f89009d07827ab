-- apply_acked.lua: the checked write and asynq's acknowledgement of the
-- same delivery (its done script, verbatim, as asynq_done) in one script
-- (Store.ApplyAcked). asynq's body runs in a function whose parameters KEYS
-- and ARGV shadow the script's: it reads only the first five keys and three
-- arguments, which is where they are.
-- KEYS[1..5] asynq's done keys (active, lease, task hash, processed
-- counters), KEYS[6] task record, KEYS[7] history, KEYS[8] webhook outbox,
-- KEYS[9] the webhooks' due set (KEYS[8..9] only when the task names
-- webhooks), and last the fair dispatch's four release keys
-- (internal/broker's ReleaseKeys: the run's tenant count is lowered when
-- asynq's done ran)
-- ARGV[1..3] asynq's done arguments, ARGV[4..] rec_apply's.
-- With the next run asked for (complete-and-fetch-next: internal/broker's
-- Next), KEYS end with dequeue.lua's nine keys after the release keys and
-- ARGV[4..9] are dequeue.lua's six arguments (rec_apply's follow them).
-- Returns rec_apply's reply; with the next run asked for and asynq's done
-- run, acked.lua's: the next run's message when the reply is R.applied
-- and a run was handed out, else {"next", rec_apply's reply,
-- the next run's message or false, its task ID or false} (R.applied
-- alone when no run was). On R.seed and R.outbox nothing is written and asynq's done
-- has not run; otherwise it has, after the record write (which R.stale,
-- R.ended and R.canceled leave undone), and its error (NOT FOUND: the
-- delivery was no longer active) is the reply. acked.lua, which ends the
-- script, runs asynq's part.
local n, o = #KEYS, 3
local fetch = n > 13
if fetch then n, o = n - 9, 9 end
local outbox, due = nil, nil
if n == 13 then outbox, due = KEYS[8], KEYS[9] end
local r = rec_apply(KEYS[6], KEYS[7], o, outbox, due)
if type(r) == "table" and (r[1] == R.seed or r[1] == R.outbox) then return r end
