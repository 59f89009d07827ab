// Command inspector is agentq's inspector; see the README and `inspector --help`.
package main

import (
	"os"

	"github.com/agentq/agentq/internal/cli"
)

func main() { os.Exit(cli.Exec(cli.NewInspectorCmd)) }
