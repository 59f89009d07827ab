// Command demo runs agentq's main job on an embedded, in-memory Redis
// (`make demo`). `demo agent` is the bundled exec agent it runs.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/agentq/agentq/internal/buildinfo"
	"github.com/agentq/agentq/internal/demo"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "--version" {
		fmt.Println(buildinfo.String("demo"))
		return
	}
	if len(os.Args) > 1 && os.Args[1] == demo.AgentMode {
		os.Exit(demo.RunAgent(os.Stdin, os.Stdout))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := demo.Run(ctx, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}
