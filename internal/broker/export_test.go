package broker

// The scripts' sources, for TestScriptsAreAsynqs.
const (
	EnqueueSource  = enqueueSource
	ScheduleSource = scheduleSource
	DequeueSource  = asynqDequeueSource
	ForwardSource  = asynqForwardSource
	RetrySource    = asynqRetrySource
	RequeueSource  = asynqRequeueSource
	DoneSource     = asynqDoneSource
)
