package asynqcompat

// The scripts' sources, for TestScriptsAreAsynqs.
const (
	EnqueueSource  = enqueueSource
	ScheduleSource = scheduleSource
)
