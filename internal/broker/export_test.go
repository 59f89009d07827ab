package broker

// The scripts' sources, for TestScriptsAreAsynqs.
var (
	EnqueueSource  = enqueueSource
	ScheduleSource = scheduleSource
	DequeueSource  = asynqDequeueSource
	ForwardSource  = asynqForwardSource
	RetrySource    = asynqRetrySource
	RequeueSource  = asynqRequeueSource
	DoneSource     = asynqDoneSource
)

// Waiting reports whether the processor waits for a token (prefetch_test).
func (c *AsynqClient) Waiting() bool { return c.waiting.Load() }
