// Package deploy_test checks the container files (Dockerfile,
// docker-compose.yml) for the properties the code relies on; it builds no
// image.
package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/cli"
)

// dockerfileInstructions returns the Dockerfile's instructions of the final
// stage (after the last FROM), continuation lines joined.
func dockerfileInstructions(t *testing.T) []string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "Dockerfile"))
	require.NoError(t, err)
	defer f.Close()
	var out []string
	cur := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if cur == "" && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if strings.HasSuffix(line, `\`) {
			cur += strings.TrimSuffix(line, `\`) + " "
			continue
		}
		cur += line
		if strings.HasPrefix(strings.ToUpper(cur), "FROM ") {
			out = nil
		}
		out = append(out, cur)
		cur = ""
	}
	require.NoError(t, sc.Err())
	return out
}

// TestImageRunsUnderAnInit: the worker is not PID 1 in the image: tini is
// installed and is the ENTRYPOINT (exec form), so orphaned grandchildren
// of exec agents are reaped and signals are forwarded.
func TestImageRunsUnderAnInit(t *testing.T) {
	t.Parallel()
	var installsTini bool
	var entrypoint []string
	for _, ins := range dockerfileInstructions(t) {
		upper := strings.ToUpper(ins)
		switch {
		case strings.HasPrefix(upper, "RUN ") && strings.Contains(ins, "apt-get install"):
			for _, w := range strings.Fields(ins) {
				if w == "tini" {
					installsTini = true
				}
			}
		case strings.HasPrefix(upper, "ENTRYPOINT "):
			require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(ins[len("ENTRYPOINT "):])), &entrypoint),
				"ENTRYPOINT must be the exec (JSON) form: %s", ins)
		}
	}
	require.True(t, installsTini, "the final stage installs tini")
	require.NotEmpty(t, entrypoint, "the final stage has an ENTRYPOINT")
	require.Equal(t, "/usr/bin/tini", entrypoint[0])
	require.Equal(t, "--", entrypoint[len(entrypoint)-1], "tini runs CMD after --")
	require.Contains(t, entrypoint, "-s", "tini reaps as a subreaper when it is not PID 1 (compose init: true)")
}

type compose struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Build       any               `yaml:"build"`
		Command     []string          `yaml:"command"`
		Init        bool              `yaml:"init"`
		Environment map[string]string `yaml:"environment"`
	} `yaml:"services"`
}

// TestComposeInitAndToken: every agentq service runs under an init, and
// the API (on 0.0.0.0 in its container) cannot start without a token.
func TestComposeInitAndToken(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join("..", "docker-compose.yml"))
	require.NoError(t, err)
	var c compose
	require.NoError(t, yaml.Unmarshal(raw, &c))
	agentq := 0
	for name, s := range c.Services {
		if !strings.HasPrefix(s.Image, "agentq") {
			continue
		}
		agentq++
		require.True(t, s.Init, "service %s: init: true", name)
	}
	require.GreaterOrEqual(t, agentq, 2, "worker and api")
	api, ok := c.Services["api"]
	require.True(t, ok, "an api service")
	require.Contains(t, strings.Join(api.Command, " "), "serve")
	require.Equal(t, "${AGENTQ_API_TOKEN:-}", api.Environment["AGENTQ_API_TOKEN"], "the api service gets the token from the environment")
	require.NotContains(t, strings.Join(api.Command, " "), "--insecure-no-auth")
}

// requiredVarRE matches compose's required-variable interpolation,
// ${VAR:?message} and ${VAR?message} ($$ is a literal dollar).
var requiredVarRE = regexp.MustCompile(`(^|[^$])\$\{[A-Za-z_][A-Za-z0-9_]*:?\?`)

// TestComposeRunsWithoutToken: compose interpolates the whole file for
// every run, whatever services or profiles are asked for, so a
// required-variable form anywhere makes a workers-only run fail to parse
// without AGENTQ_API_TOKEN. The file has none; the token is required by the
// API services themselves: each runs `enqueuer serve` on a non-loopback
// address, which refuses to start without it (exit 2 before it touches
// Redis), as this runs it with the service's own command and config.
func TestComposeRunsWithoutToken(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join("..", "docker-compose.yml"))
	require.NoError(t, err)
	var doc yaml.Node
	require.NoError(t, yaml.Unmarshal(raw, &doc))
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.ScalarNode:
			require.False(t, requiredVarRE.MatchString(n.Value),
				"docker-compose.yml:%d: %s: %q: a required variable fails every compose run, not only this service's", n.Line, path, n.Value)
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				walk(n.Content[i], path)
				walk(n.Content[i+1], path+"."+n.Content[i].Value)
			}
		default:
			for _, c := range n.Content {
				walk(c, path)
			}
		}
	}
	walk(&doc, "")

	var c compose
	require.NoError(t, yaml.Unmarshal(raw, &c))
	serves := 0
	for name, s := range c.Services {
		if len(s.Command) < 2 || s.Command[0] != "enqueuer" || s.Command[1] != "serve" {
			continue
		}
		serves++
		t.Run(name, func(t *testing.T) {
			args := append([]string(nil), s.Command[1:]...)
			for i, a := range args {
				if a == "/etc/agentq/agentq.yaml" {
					args[i] = filepath.Join("..", "deploy", "agentq.yaml")
				}
			}
			var out, errb bytes.Buffer
			env := func(k string) string {
				if k == "AGENTQ_REDIS_URL" {
					return "redis://127.0.0.1:1/0" // never reached
				}
				return "" // AGENTQ_API_TOKEN unset: ${AGENTQ_API_TOKEN:-} is ""
			}
			app := &cli.App{Out: &out, Err: &errb, In: strings.NewReader(""), Getenv: env}
			code := cli.Main(context.Background(), app, cli.NewEnqueuerCmd, args)
			require.Equal(t, cli.ExitUsage, code, errb.String())
			require.Contains(t, errb.String(), "AGENTQ_API_TOKEN")
			require.Contains(t, errb.String(), "refusing to serve")
		})
	}
	require.Equal(t, 3, serves, "api, api-sentinel, api-cluster")
}

// TestDockerignore: the build context leaves out the local binaries (a
// bin/ of 146 MB was sent to the daemon on every build), .git and test
// output.
func TestDockerignore(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join("..", ".dockerignore"))
	require.NoError(t, err, "a .dockerignore beside the Dockerfile")
	var patterns []string
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") {
			patterns = append(patterns, strings.TrimSuffix(strings.TrimPrefix(line, "/"), "/"))
		}
	}
	for _, want := range []string{"bin", ".git", "**/*.test", "**/*.out", ".tmp", "internal/console/.screenshots"} {
		require.Contains(t, patterns, want)
	}
	for _, p := range patterns {
		require.False(t, strings.HasPrefix(p, "!"), "no exceptions: %s", p)
		for _, kept := range []string{"go.mod", "go.sum", "deploy/agentq.yaml", "cmd"} {
			ok, err := filepath.Match(p, kept)
			require.NoError(t, err)
			require.False(t, ok, "%s would leave %s out of the build", p, kept)
		}
	}
}

// TestComposeProfiles: the sentinel and cluster profiles each run a worker
// pool and an API (under an init, the API with a required token) on their
// own Redis, whose AGENTQ_REDIS_URL is a valid redis+sentinel:// or
// redis+cluster:// URL naming services of the same profile, with a config
// that validates and asks for a replica per write.
func TestComposeProfiles(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join("..", "docker-compose.yml"))
	require.NoError(t, err)
	var c struct {
		Services map[string]struct {
			Profiles    []string          `yaml:"profiles"`
			Image       string            `yaml:"image"`
			Command     []string          `yaml:"command"`
			Init        bool              `yaml:"init"`
			Environment map[string]string `yaml:"environment"`
			Volumes     []string          `yaml:"volumes"`
		} `yaml:"services"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &c))
	for _, tc := range []struct{ profile, scheme string }{{"sentinel", config.SchemeSentinel}, {"cluster", config.SchemeCluster}} {
		for _, role := range []string{"worker", "api"} {
			name := role + "-" + tc.profile
			s, ok := c.Services[name]
			require.True(t, ok, "service %s", name)
			require.Equal(t, []string{tc.profile}, s.Profiles, name)
			require.True(t, s.Init, "%s: init: true", name)
			require.Equal(t, "${AGENTQ_API_TOKEN:-}", s.Environment["AGENTQ_API_TOKEN"], name)
			url := s.Environment["AGENTQ_REDIS_URL"]
			require.True(t, strings.HasPrefix(url, tc.scheme+"://"), "%s: %q", name, url)
			sg, cl, err := config.ParseRedisURL(url)
			require.NoError(t, err, name)
			var addrs []string
			if sg != nil {
				addrs = sg.Addrs
			} else {
				addrs = cl.Addrs
			}
			for _, a := range addrs {
				host, _, _ := strings.Cut(a, ":")
				dep, ok := c.Services[host]
				require.True(t, ok, "%s: %s names no service", name, a)
				require.Equal(t, []string{tc.profile}, dep.Profiles, "%s: %s is in the same profile", name, host)
			}
			require.Contains(t, s.Volumes, "./deploy/agentq-ha.yaml:/etc/agentq/agentq.yaml:ro", name)
		}
	}
	cfg, err := config.Load(filepath.Join("..", "deploy", "agentq-ha.yaml"))
	require.NoError(t, err)
	require.Equal(t, 1, cfg.Redis.WaitReplicas)
}
