// Command enqueuer is agentq's enqueuer; see the README and `enqueuer --help`.
package main

import (
	"os"

	"github.com/agentq/agentq/internal/cli"
)

func main() { os.Exit(cli.Exec(cli.NewEnqueuerCmd)) }
