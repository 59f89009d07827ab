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
