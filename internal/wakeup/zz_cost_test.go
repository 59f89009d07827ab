package wakeup_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/asynqcompat"
	"github.com/agentq/agentq/internal/fair"
)

func cpuOf(b *fairBundle) float64 {
	info := b.rdb.Info(b.ctx, "cpu").Val()
	var total float64
	for _, line := range strings.Split(info, "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && (k == "used_cpu_user" || k == "used_cpu_sys") {
			f, _ := strconv.ParseFloat(v, 64)
			total += f
		}
	}
	return total
}

func TestZZCost(t *testing.T) {
	if os.Getenv("FAIR_COST") == "" {
		t.Skip()
	}
	const n = 20000
	for _, lane := range []fair.Lane{{}, {Tenant: "a"}, {Tenant: "a"}} {
		b := setupFair(t, fair.Config{})
		c0 := cpuOf(b)
		ids := b.enqueue(lane, n)
		c1 := cpuOf(b)
		for range ids {
			id := b.dequeue()
			b.done(id)
		}
		c2 := cpuOf(b)
		fmt.Printf("lane %+v: enqueue %.1fµs  dequeue+done %.1fµs\n", lane, (c1-c0)/n*1e6, (c2-c1)/n*1e6)
		_ = time.Now
		_ = asynqcompat.TaskKey
	}
}
