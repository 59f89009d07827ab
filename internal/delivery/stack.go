package delivery

// stackHint is what growStack adds to a goroutine's stack: with the few
// frames below it, the 16 KiB stack a delivery's goroutine reaches in a
// call of the agent and a record write through go-redis (the delivery's
// and the record's frames, which hold a record change, a delivery and an
// attempt's report by value, are about 1 KiB each).
const stackHint = 12 << 10

// growStack grows the calling goroutine's stack to what a delivery needs
// at once, while the goroutine is shallow. Each goroutine that runs a
// delivery (asynq starts one per task, and another that answers it; a
// lazy start fires in a timer's) starts with the runtime's average
// stack, and grew it by doubling deep in the call, each time copying its
// stack and adjusting the pointers of every frame: runtime.newstack was
// 11.6% of the worker's CPU on the I/O-bound benchmark (the per-task
// goroutine, the lazy start's and asynq's answering one), 4% with this.
// Its frame holds a stackHint pad, which the function's entry makes room
// for; the pad is used only on a branch never taken (stackPadUsed is
// false), so it is never zeroed either.
func growStack() { stackFrame(stackPadUsed) }

// stackPadUsed is false; a variable, so that the compiler keeps the pad.
var stackPadUsed = false

//go:noinline
func stackFrame(used bool) {
	if used {
		var pad [stackHint]byte
		touch(&pad)
	}
}

// touch keeps stackFrame's pad (and so its frame) from being optimized
// away; it does not let it escape to the heap.
//
//go:noinline
func touch(p *[stackHint]byte) { p[0] = 1 }
