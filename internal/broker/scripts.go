package broker

import (
	"embed"
	"io/fs"
	"strings"

	"github.com/agentq/agentq/internal/redisx"
)

// luaFiles are the package's scripts: one .lua per operation in lua/, the
// functions they share in lua/lib/, and asynq's own scripts, verbatim, in
// lua/asynq/.
//
//go:embed lua/*.lua lua/lib/*.lua lua/asynq/*.lua
var luaFiles embed.FS

// scripts renders the package's .lua files: F names the fields agentq
// adds to asynq's task hash (fair.go's lane and count), C the constants.
var scripts = redisx.NewScripts("broker", mustSub(luaFiles, "lua"), map[string]map[string]string{
	"F": redisx.Literals(map[string]any{"tenant": FieldTenant, "priority": FieldPriority, "counted": FieldCounted}),
	"C": redisx.Literals(map[string]any{"wake_cap": WakeCap}),
})

func mustSub(fsys fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		panic("broker: " + err.Error())
	}
	return sub
}

// asynqSource is asynq's script name (lua/asynq/name.lua), verbatim: the
// body of the function asynq_name(KEYS, ARGV) that the file defines,
// byte for byte as asynq sends it (its SHA-1 is what AsynqClient
// recognises; TestScriptsAreAsynqs holds it to asynq's source).
func asynqSource(name string) string {
	b, err := fs.ReadFile(luaFiles, "lua/asynq/"+name+".lua")
	if err != nil {
		panic("broker: " + err.Error())
	}
	open, end := "local function asynq_"+name+"(KEYS, ARGV)", "\nend\n"
	src := string(b)
	i := strings.Index(src, open)
	if i < 0 || !strings.HasSuffix(src, end) {
		panic("broker: lua/asynq/" + name + ".lua does not define asynq_" + name + "(KEYS, ARGV) … end")
	}
	return src[i+len(open) : len(src)-len(end)]
}
