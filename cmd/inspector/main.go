// Command inspector is agentq's inspector; see the README and `inspector --help`.
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
	code := cli.Main(ctx, cli.NewApp(), cli.NewInspectorCmd, os.Args[1:])
	stop()
	os.Exit(code)
}
