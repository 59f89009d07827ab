// Command enqueuer is agentq's enqueuer; see the README and `enqueuer --help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/agentq/agentq/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, cli.NewApp(), cli.NewEnqueuerCmd, os.Args[1:])
	stop()
	os.Exit(code)
}
