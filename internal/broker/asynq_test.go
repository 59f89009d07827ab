package broker_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/redisx"
	"github.com/agentq/agentq/internal/testbin"
)

const asynqModule = "github.com/hibiken/asynq"

// recheck is what to do when asynq is upgraded.
const recheck = `internal/broker copies asynq ` + broker.AsynqVersion + `'s internals, which tasks.Client.EnqueueMany writes with.
Before changing broker.AsynqVersion, compare against the new asynq:
  - its key layout (internal/base: AllQueues, TaskKey, PendingKey, ScheduledKey, LeaseKey) and its lease recovery (recoverer.go: inspect.Workers's recovery window),
  - the scripts its client runs (internal/rdb/rdb.go: enqueueCmd, scheduleCmd) and their arguments (RDB.Enqueue, RDB.Schedule),
  - its TaskMessage (internal/proto/asynq.proto) and what Client.Enqueue puts in it (options, defaults, new fields),
then run TestMatchesAsynqClient here and TestAsynqEnqueueManyMatchesAsynq in tasks.`

// TestAsynqVersion fails loudly when the asynq that go.mod requires is not
// the one this package copies, or is replaced by another.
func TestAsynqVersion(t *testing.T) {
	t.Parallel()
	version, replaced := goModAsynq(t)
	require.Empty(t, replaced, "go.mod replaces asynq.\n%s", recheck)
	require.Equal(t, broker.AsynqVersion, version, "asynq's version in go.mod changed.\n%s", recheck)
}

// goModAsynq reads the version of asynq that the module's go.mod requires,
// and the line that replaces it, if one does.
func goModAsynq(t *testing.T) (version, replaced string) {
	b, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		for i, f := range fields {
			switch {
			case f != asynqModule:
			case i > 0 && fields[0] == "replace", slices.Contains(fields, "=>"):
				replaced = line
			case i+1 < len(fields):
				version = fields[i+1]
			}
		}
	}
	require.NotEmpty(t, version, "go.mod does not require %s", asynqModule)
	return version, replaced
}

// TestScriptsAreAsynqs finds the enqueue and schedule scripts, and the
// server scripts the worker recognises, verbatim, in
// the source of the asynq module agentq builds with.
func TestScriptsAreAsynqs(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(testbin.GoTool(), "list", "-m", "-f", "{{.Dir}}", asynqModule).Output()
	require.NoError(t, err, "go list -m %s", asynqModule)
	src, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "internal", "rdb", "rdb.go"))
	require.NoError(t, err)
	for name, script := range map[string]string{
		"enqueueCmd":  broker.EnqueueSource,
		"scheduleCmd": broker.ScheduleSource,
		"dequeueCmd":  broker.DequeueSource,
		"forwardCmd":  broker.ForwardSource,
		"retryCmd":    broker.RetrySource,
		"requeueCmd":  broker.RequeueSource,
		"doneCmd":     broker.DoneSource,
	} {
		want := "var " + name + " = redis.NewScript(`" + script + "`)"
		require.True(t, strings.Contains(string(src), want),
			"asynq's internal/rdb/rdb.go has no\n%s\n%s", want, recheck)
	}
}

// TestMatchesAsynqClient enqueues the same tasks with asynq.Client on one
// server and with broker on another, and compares everything both
// wrote byte for byte (but for pending_since, a time of writing); writing a
// task ID again is refused by both.
func TestMatchesAsynqClient(t *testing.T) {
	t.Parallel()
	processAt := time.Now().Add(time.Hour).Truncate(time.Second)
	tasks := []broker.AsynqTask{
		{Type: "agentq:task", Payload: []byte(`{"a":[1,2,3],"s":"` + strings.Repeat("x", 300) + `"}`), ID: "t-1", Queue: "default", MaxRetry: 1 << 30, Timeout: 24 * time.Hour},
		{Type: "other", ID: "t-2", Queue: "critical", MaxRetry: 3, Timeout: 90 * time.Second},
		{Type: "bare", Payload: []byte{0, 1, 2}, ID: "t-3", Queue: "default"},
	}
	for _, b := range redistest.Backends() {
		for _, scheduled := range []bool{false, true} {
			name := b.Name + "/now"
			if scheduled {
				name = b.Name + "/scheduled"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				viaAsynq, _ := b.New(t)
				viaCompat, _ := b.New(t)
				aq := asynq.NewClientFromRedisClient(viaAsynq)
				for _, task := range tasks {
					opts := []asynq.Option{asynq.TaskID(task.ID), asynq.Queue(task.Queue), asynq.MaxRetry(task.MaxRetry), asynq.Timeout(task.Timeout)}
					if scheduled {
						opts = append(opts, asynq.ProcessAt(processAt))
					}
					_, err := aq.Enqueue(asynq.NewTask(task.Type, task.Payload), opts...)
					require.NoError(t, err)
					_, err = aq.Enqueue(asynq.NewTask(task.Type, task.Payload), opts...)
					require.ErrorIs(t, err, asynq.ErrTaskIDConflict)

					require.NoError(t, broker.RegisterQueues(ctx, viaCompat, task.Queue))
					call := broker.AsynqEnqueue(task, time.Now())
					if scheduled {
						call = broker.AsynqSchedule(task, processAt)
					}
					for _, want := range []bool{true, false} {
						added, err := broker.AsynqAdded(redisx.Pipelined(ctx, viaCompat, []redisx.Call{call})[0])
						require.NoError(t, err)
						require.Equal(t, want, added, "task %s", task.ID)
					}
				}
				require.Equal(t, redistest.Dump(t, viaAsynq, "pending_since"), redistest.Dump(t, viaCompat, "pending_since"))
				info, err := asynq.NewInspectorFromRedisClient(viaCompat).GetTaskInfo("critical", "t-2")
				require.NoError(t, err)
				require.Equal(t, "other", info.Type)
				require.Equal(t, 3, info.MaxRetry)
				require.Equal(t, 90*time.Second, info.Timeout)
			})
		}
	}
}

// TestMessageID reads the task ID out of the TaskMessage asynq's own
// client wrote, and out of AsynqTask.Message's; a message that is not one
// has none.
func TestMessageID(t *testing.T) {
	t.Parallel()
	rdb, _ := redistest.Backends()[0].New(t)
	ctx := context.Background()
	_, err := asynq.NewClientFromRedisClient(rdb).Enqueue(asynq.NewTask("chat", []byte(`{"p":1}`)), asynq.TaskID("id-1"), asynq.MaxRetry(5))
	require.NoError(t, err)
	msg, err := rdb.HGet(ctx, broker.TaskKey("default", "id-1"), "msg").Result()
	require.NoError(t, err)
	id, ok := broker.MessageID([]byte(msg))
	require.True(t, ok)
	require.Equal(t, "id-1", id)
	id, ok = broker.MessageID(broker.AsynqTask{Type: "t", Payload: []byte{3, 0}, ID: "id-2", Queue: "q", MaxRetry: 2}.Message())
	require.True(t, ok)
	require.Equal(t, "id-2", id)
	for _, bad := range []string{"", "msg of id-3", "\x1a\x05id"} {
		_, ok := broker.MessageID([]byte(bad))
		require.False(t, ok, "%q", bad)
	}
}
