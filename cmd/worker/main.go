// Command worker is agentq's worker; see the README and `worker --help`.
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
	code := cli.Main(ctx, cli.NewApp(), cli.NewWorkerCmd, os.Args[1:])
	stop()
	os.Exit(code)
}
