package api_test

import (
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/api"
	"github.com/agentq/agentq/internal/httpx"
)

// BenchmarkStreamMemory measures what one open event stream costs the
// server: it opens 2,000 streams (or waits, -bench=/wait) on raw TCP
// connections (which cost the client next to nothing) and reports the
// growth of the heap and the goroutine stacks per stream, after a GC.
// docs/operations.md sizes the API's memory limit from it.
func BenchmarkStreamMemory(b *testing.B) {
	for _, kind := range []string{"stream", "wait"} {
		b.Run(kind, func(b *testing.B) {
			const n = 2000
			holds := httpx.NewHolds(httpx.HoldsOptions{})
			e := setup(b, api.Options{Holds: holds})
			id := "mem1"
			enqueueQueued(b, e, id)
			path := "/api/v1/tasks/" + id + "/events"
			if kind == "wait" {
				path = "/api/v1/tasks/" + id + "?wait=60s"
			}
			host := strings.TrimPrefix(e.url, "http://")
			before := inUse()
			conns := make([]net.Conn, 0, n)
			defer func() {
				for _, c := range conns {
					_ = c.Close()
				}
			}()
			for range n {
				c, err := net.Dial("tcp", host)
				require.NoError(b, err)
				_, err = fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, host)
				require.NoError(b, err)
				conns = append(conns, c)
			}
			require.Eventually(b, func() bool { return holds.Open() == n }, time.Minute, 10*time.Millisecond)
			time.Sleep(500 * time.Millisecond) // let the handlers reach their wait
			after := inUse()
			b.ReportMetric(float64(after-before)/n, "bytes/"+kind)
		})
	}
}

// inUse is the heap and goroutine stacks in use after a GC.
func inUse() int64 {
	for range 6 { // each GC halves the stacks that use under a quarter of theirs
		runtime.GC()
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse + m.StackInuse)
}
