// Package deploy_test checks the container files (Dockerfile,
// docker-compose.yml) for the properties the code relies on; it builds no
// image.
package deploy_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/agentq/agentq/config"
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
	tok := api.Environment["AGENTQ_API_TOKEN"]
	require.True(t, strings.HasPrefix(tok, "${AGENTQ_API_TOKEN:?"), "the api service requires AGENTQ_API_TOKEN (compose fails without it): %q", tok)
	require.NotContains(t, strings.Join(api.Command, " "), "--insecure-no-auth")
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
			require.True(t, strings.HasPrefix(s.Environment["AGENTQ_API_TOKEN"], "${AGENTQ_API_TOKEN:?"), name)
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
