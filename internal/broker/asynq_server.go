package broker

import "github.com/redis/go-redis/v9"

// The scripts an asynq v0.26 server runs that AsynqClient watches: verbatim
// copies (lua/asynq/), recognised by their SHA-1 (the EVALSHA asynq sends).
// TestScriptsAreAsynqs holds them to asynq's source.
var (
	// AsynqDequeueScript is asynq's dequeueCmd: pop a pending task of one queue.
	// KEYS[1] pending, KEYS[2] paused, KEYS[3] active, KEYS[4] lease;
	// ARGV[1] lease expiry (Unix s), ARGV[2] task key prefix. Replies the
	// task's message, or nil (redis.Nil) when the queue is empty or paused.
	AsynqDequeueScript = redis.NewScript(asynqDequeueSource)
	// AsynqForwardScript is asynq's forwardCmd: move up to 100 due tasks of a
	// scheduled or retry set to pending. KEYS[1] the scheduled or retry set,
	// KEYS[2] pending; ARGV[1] now (Unix s), ARGV[2] task key prefix,
	// ARGV[3] now (Unix ns), ARGV[4] group key prefix. Replies the number moved.
	AsynqForwardScript = redis.NewScript(asynqForwardSource)
	// AsynqRetryScript is asynq's retryCmd: active to the retry set. KEYS[4] is
	// the retry set; ARGV[3] the time the retry is due (Unix s).
	AsynqRetryScript = redis.NewScript(asynqRetrySource)
	// AsynqRequeueScript is asynq's requeueCmd: active back to pending (a
	// shutting-down server's unfinished tasks). KEYS[3] is the pending list.
	AsynqRequeueScript = redis.NewScript(asynqRequeueSource)
	// AsynqDoneScript is asynq's doneCmd: acknowledge a task that succeeded
	// (active and lease entries and the task hash deleted, processed
	// counters raised). KEYS[1] active, KEYS[2] lease, KEYS[3] the task
	// hash, KEYS[4] today's processed counter, KEYS[5] the processed total;
	// ARGV[1] task ID, ARGV[2] the counter's expiry (Unix s), ARGV[3] the
	// total's wrap-around value. Replies OK, or the error NOT FOUND.
	AsynqDoneScript = redis.NewScript(asynqDoneSource)
)

// asynq's server scripts' sources (lua/asynq/), verbatim.
var (
	asynqDequeueSource = asynqSource("dequeue")
	asynqForwardSource = asynqSource("forward")
	asynqRetrySource   = asynqSource("retry")
	asynqRequeueSource = asynqSource("requeue")
	asynqDoneSource    = asynqSource("done")
)
