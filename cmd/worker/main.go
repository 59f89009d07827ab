// Command worker is agentq's worker; see the README and `worker --help`.
package main

import (
	"os"

	"github.com/agentq/agentq/internal/cli"
)

func main() { os.Exit(cli.Exec(cli.NewWorkerCmd)) }
