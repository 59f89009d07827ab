package webhook

import (
	"embed"

	"github.com/agentq/agentq/internal/redisx"
)

// scripts are the webhooks' Lua (lua/*.lua).
var scripts = redisx.NewScripts("webhook", luaFiles, nil)

//go:embed lua/*.lua
var luaFiles embed.FS
