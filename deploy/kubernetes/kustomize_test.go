// Package kubernetes_test renders deploy/kubernetes (the base and every
// overlay) with the kustomize Go module, as `kubectl apply -k` would, and
// checks the objects against the code: the ports and probe paths are
// served by the worker's ops handler and the API's route table, every
// environment variable is one the code reads, the ConfigMap's config loads,
// the KEDA trigger's query names the series (and label values) a real
// worker exports and its threshold is the worker's concurrency, the
// autoscaler alone sets the worker's replicas, HPA metric names exist in
// the worker's registry, the grace period covers the worker's shutdown and
// the pods run non-root on a read-only filesystem.
package kubernetes_test

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/api"
	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/configx"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/tracing"
	"github.com/agentq/agentq/worker"
)

// The names the manifests give their objects.
const (
	workerName = "agentq-worker"
	apiName    = "agentq-api"
	secretName = "agentq"
	configKey  = "agentq.yaml" // the ConfigMap's data key, the file the processes read
)

// killAndWait is what a worker's shutdown takes beyond
// worker.shutdown_timeout (docs/operations.md, "Graceful shutdown"): exec
// agents get SIGKILL agent.DefaultKillGrace after their SIGTERM, and the
// worker waits up to 10 s for its agents to return.
const killAndWait = agent.DefaultKillGrace + 10*time.Second

// kustomizations are the directories `kubectl apply -k` takes, with the
// Redis topology of their config and how they scale workers.
var kustomizations = []struct {
	dir      string
	topology string // "url", "sentinel", "cluster"
	keda     bool   // a ScaledObject, else an HPA
}{
	{dir: ".", topology: "url", keda: true},
	{dir: "base", topology: "url", keda: true},
	{dir: "overlays/hpa", topology: "url", keda: false},
	{dir: "overlays/sentinel", topology: "sentinel", keda: true},
	{dir: "overlays/cluster", topology: "cluster", keda: true},
}

// subtestName names a kustomization's subtest after its directory.
func subtestName(dir string) string {
	if dir == "." {
		return "deploy_kubernetes"
	}
	return strings.ReplaceAll(dir, "/", "_")
}

func TestKustomizations(t *testing.T) {
	t.Parallel()
	paths := workerOpsPaths(t)
	metrics := workerMetricNames(t)
	exported := workerExports(t)
	keys := exampleSecretKeys(t)
	for _, k := range kustomizations {
		t.Run(subtestName(k.dir), func(t *testing.T) {
			t.Parallel()
			s := setup(t, k.dir)
			switch k.topology {
			case "sentinel":
				require.NotNil(t, s.cfg.Redis.Sentinel, "%s: the config sets redis.sentinel", k.dir)
			case "cluster":
				require.NotNil(t, s.cfg.Redis.Cluster, "%s: the config sets redis.cluster", k.dir)
			default:
				require.NotEmpty(t, s.cfg.Redis.URL)
			}
			checkConfigMount(t, s)
			checkWorker(t, s, paths)
			checkAPI(t, s)
			checkEnv(t, s, keys, k.topology != "url")
			checkSecurity(t, s)
			checkPDBs(t, s)
			if k.keda {
				checkScaledObject(t, s, exported)
			} else {
				checkHPA(t, s, metrics)
			}
		})
	}
}

// rendered is one kustomization's output.
type rendered struct {
	dir        string
	objs       []object
	cfg        *config.Config
	configMap  string // the generated ConfigMap's name
	worker     deployment
	api        deployment
	workerPod  container
	apiPod     container
	configVars map[string]bool // the ${VAR}s the config reads (headers, Redis passwords)
}

// kustomizeMu serializes kustomize builds: kyaml's openapi package keeps
// global schema state it initializes lazily without a lock, so two builds
// at once race (-race saw it on a clean clone's CI run). The checks of the
// rendered output still run in parallel.
var kustomizeMu sync.Mutex

func setup(t *testing.T, dir string) *rendered {
	t.Helper()
	kustomizeMu.Lock()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(filesys.MakeFsOnDisk(), dir)
	kustomizeMu.Unlock()
	require.NoError(t, err, "kustomize build %s", dir)
	s := &rendered{dir: dir}
	for _, r := range rm.Resources() {
		y, err := r.AsYAML()
		require.NoError(t, err)
		var o object
		require.NoError(t, yaml.Unmarshal(y, &o), "%s", y)
		o.raw = y
		s.objs = append(s.objs, o)
	}
	cms := s.all("ConfigMap")
	require.Len(t, cms, 1, "%s: one ConfigMap, the config", dir)
	var cm struct {
		Data map[string]string `yaml:"data"`
	}
	cms[0].decode(t, &cm)
	require.Contains(t, cm.Data, configKey)
	require.True(t, strings.HasPrefix(cms[0].Metadata.Name, "agentq-config-"), "generated with a content hash: %s", cms[0].Metadata.Name)
	s.configMap = cms[0].Metadata.Name
	// Parse is what config.Load runs on the file (unknown fields are
	// errors, every value is validated), without the environment.
	s.cfg, err = config.Parse([]byte(cm.Data[configKey]), dir+"/"+configKey)
	require.NoError(t, err, "%s: the ConfigMap's %s", dir, configKey)
	s.configVars = configVars(t, s.cfg)
	s.one(t, "Deployment", workerName).decode(t, &s.worker)
	s.one(t, "Deployment", apiName).decode(t, &s.api)
	require.Len(t, s.worker.Spec.Template.Spec.Containers, 1)
	require.Len(t, s.api.Spec.Template.Spec.Containers, 1)
	s.workerPod = s.worker.Spec.Template.Spec.Containers[0]
	s.apiPod = s.api.Spec.Template.Spec.Containers[0]
	return s
}

func (s *rendered) all(kind string) []object {
	var out []object
	for _, o := range s.objs {
		if o.Kind == kind {
			out = append(out, o)
		}
	}
	return out
}

func (s *rendered) one(t *testing.T, kind, name string) object {
	t.Helper()
	for _, o := range s.all(kind) {
		if o.Metadata.Name == name {
			return o
		}
	}
	t.Fatalf("%s: no %s %s", s.dir, kind, name)
	return object{}
}

// checkConfigMount: both Deployments mount the generated ConfigMap where
// --config says, and run binaries the image has (built from cmd/).
func checkConfigMount(t *testing.T, s *rendered) {
	t.Helper()
	for _, d := range []deployment{s.worker, s.api} {
		c := d.Spec.Template.Spec.Containers[0]
		require.NotEmpty(t, c.Args)
		_, err := os.Stat(filepath.Join("..", "..", "cmd", c.Args[0]))
		require.NoError(t, err, "%s runs %q: the image has the binaries of cmd/ only", c.Name, c.Args[0])
		path := flagValue(t, c.Args, "--config")
		vol := ""
		for _, m := range c.VolumeMounts {
			if strings.TrimSuffix(m.MountPath, "/")+"/"+configKey == path {
				vol = m.Name
			}
		}
		require.NotEmpty(t, vol, "%s: --config %s is the ConfigMap's %s", c.Name, path, configKey)
		found := false
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name == vol && v.ConfigMap != nil {
				require.Equal(t, s.configMap, v.ConfigMap.Name, "%s mounts the generated ConfigMap", c.Name)
				found = true
			}
		}
		require.True(t, found, "%s: volume %s is the ConfigMap", c.Name, vol)
	}
}

// checkWorker: the worker's ops port is worker.http_addr's, off loopback;
// its probes and the Prometheus scrape path are served by the worker's ops
// handler; the grace period covers the whole shutdown.
func checkWorker(t *testing.T, s *rendered, served map[string]int) {
	t.Helper()
	addr := s.cfg.Worker.HTTPAddr
	require.NotEmpty(t, addr, "worker.http_addr is set: the probes need it")
	require.False(t, api.IsLoopbackAddr(addr), "worker.http_addr %s is reachable from the kubelet", addr)
	port := addrPort(t, addr)
	c := s.workerPod
	require.NotEmpty(t, flagValue(t, c.Args, "--config"))
	require.Empty(t, flagValueOr(c.Args, "--http"), "the worker's address is the config's")
	for _, p := range []*probe{c.LivenessProbe, c.ReadinessProbe} {
		require.NotNil(t, p, "worker: liveness and readiness probes")
		require.NotNil(t, p.HTTPGet)
		require.Equal(t, port, c.port(t, p.HTTPGet.Port), "worker probe %s on worker.http_addr's port", p.HTTPGet.Path)
		require.Equal(t, http.StatusOK, served[p.HTTPGet.Path], "worker probe %s: served by worker.OpsHandler", p.HTTPGet.Path)
	}
	require.Equal(t, "/healthz", c.LivenessProbe.HTTPGet.Path, "liveness must not depend on Redis")
	require.Nil(t, s.worker.Spec.Replicas, "the autoscaler (KEDA or the HPA) owns the worker's replicas: an apply must not reset them")
	ann := s.worker.Spec.Template.Metadata.Annotations
	if ann["prometheus.io/scrape"] == "true" {
		require.Equal(t, strconv.Itoa(port), ann["prometheus.io/port"])
		require.Equal(t, http.StatusOK, served[ann["prometheus.io/path"]], "the scrape path %s is served", ann["prometheus.io/path"])
	}
	grace := s.worker.Spec.Template.Spec.TerminationGracePeriodSeconds
	require.NotNil(t, grace, "worker: terminationGracePeriodSeconds")
	need := s.cfg.Worker.ShutdownTimeout + killAndWait
	require.Greater(t, time.Duration(*grace)*time.Second, need,
		"worker: terminationGracePeriodSeconds %d must exceed shutdown_timeout %s + %s", *grace, s.cfg.Worker.ShutdownTimeout, killAndWait)
}

// checkAPI: `enqueuer serve` listens off loopback on the container port
// the Service targets; its probes are unauthenticated GET routes of the
// API's route table.
func checkAPI(t *testing.T, s *rendered) {
	t.Helper()
	c := s.apiPod
	require.Equal(t, []string{"enqueuer", "serve"}, c.Args[:2])
	addr := flagValue(t, c.Args, "--http")
	require.False(t, api.IsLoopbackAddr(addr), "enqueuer serve --http %s is reachable from the Service", addr)
	port := addrPort(t, addr)
	for _, p := range []*probe{c.LivenessProbe, c.ReadinessProbe} {
		require.NotNil(t, p, "api: liveness and readiness probes")
		require.NotNil(t, p.HTTPGet)
		require.Equal(t, port, c.port(t, p.HTTPGet.Port), "api probe %s on --http's port", p.HTTPGet.Path)
		require.True(t, slices.ContainsFunc(api.Routes(), func(r api.Route) bool {
			return r.Path == p.HTTPGet.Path && r.Method == http.MethodGet && !r.Auth
		}), "api probe %s: a GET route of api.Routes() that needs no token", p.HTTPGet.Path)
	}
	require.Equal(t, "/healthz", c.ReadinessProbe.HTTPGet.Path, "readiness is the API's Redis check")
	var svc service
	s.one(t, "Service", apiName).decode(t, &svc)
	require.Len(t, svc.Spec.Ports, 1)
	require.Equal(t, port, c.port(t, svc.Spec.Ports[0].TargetPort), "the Service targets --http's port")
	require.True(t, subset(svc.Spec.Selector, s.api.Spec.Template.Metadata.Labels), "the Service selects the API pods")
	require.False(t, subset(svc.Spec.Selector, s.worker.Spec.Template.Metadata.Labels), "…and not the workers")
}

// checkEnv: every variable is one the code reads; secrets come from the
// Secret with keys that secret.example.yaml lists; the worker gets every
// ${VAR} the config reads; AGENTQ_REDIS_URL is there unless the config's
// topology must win (it would replace redis.sentinel / redis.cluster).
func checkEnv(t *testing.T, s *rendered, exampleKeys map[string]bool, topologyInConfig bool) {
	t.Helper()
	read := codeVars(s.configVars)
	for _, c := range []container{s.workerPod, s.apiPod} {
		for _, e := range c.Env {
			require.True(t, read[e.Name], "%s: env %s is read by no code (known: %v)", c.Name, e.Name, keysOf(read))
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				ref := e.ValueFrom.SecretKeyRef
				require.Equal(t, secretName, ref.Name)
				require.True(t, exampleKeys[ref.Key], "%s: Secret key %s is in secret.example.yaml", c.Name, ref.Key)
			}
		}
		_, hasURL := c.env(config.EnvRedisURL)
		require.Equal(t, !topologyInConfig, hasURL, "%s: %s given iff the config's topology is a plain URL", c.Name, config.EnvRedisURL)
		if hasURL {
			e, _ := c.env(config.EnvRedisURL)
			require.False(t, e.ValueFrom.SecretKeyRef.Optional, "%s: %s is required", c.Name, config.EnvRedisURL)
		}
	}
	tok, ok := s.apiPod.env(api.EnvToken)
	require.True(t, ok && tok.ValueFrom != nil && tok.ValueFrom.SecretKeyRef != nil && !tok.ValueFrom.SecretKeyRef.Optional,
		"enqueuer serve on 0.0.0.0 requires %s from the Secret", api.EnvToken)
	for v := range s.configVars {
		_, ok := s.workerPod.env(v)
		require.True(t, ok, "the config reads ${%s}: the worker container sets it", v)
	}
}

// checkSecurity: non-root, no privilege escalation, no capabilities,
// read-only root filesystem, RuntimeDefault seccomp, for every pod.
func checkSecurity(t *testing.T, s *rendered) {
	t.Helper()
	for _, d := range []deployment{s.worker, s.api} {
		ps := d.Spec.Template.Spec.SecurityContext
		require.NotNil(t, ps)
		require.True(t, ps.RunAsNonRoot != nil && *ps.RunAsNonRoot, "%s: runAsNonRoot", d.Metadata.Name)
		require.True(t, ps.RunAsUser != nil && *ps.RunAsUser != 0, "%s: a non-zero runAsUser", d.Metadata.Name)
		require.Equal(t, "RuntimeDefault", ps.SeccompProfile.Type, "%s: seccomp", d.Metadata.Name)
		for _, c := range d.Spec.Template.Spec.Containers {
			cs := c.SecurityContext
			require.NotNil(t, cs, c.Name)
			require.True(t, cs.AllowPrivilegeEscalation != nil && !*cs.AllowPrivilegeEscalation, "%s: allowPrivilegeEscalation false", c.Name)
			require.True(t, cs.ReadOnlyRootFilesystem != nil && *cs.ReadOnlyRootFilesystem, "%s: readOnlyRootFilesystem", c.Name)
			require.True(t, cs.RunAsNonRoot == nil || *cs.RunAsNonRoot, "%s: runAsNonRoot not undone", c.Name)
			require.Equal(t, []string{"ALL"}, cs.Capabilities.Drop, "%s: drop ALL capabilities", c.Name)
			require.Empty(t, cs.Capabilities.Add, c.Name)
			require.True(t, slices.ContainsFunc(c.VolumeMounts, func(m mount) bool { return m.MountPath == "/tmp" }),
				"%s: a writable /tmp on the read-only root", c.Name)
		}
	}
}

// checkPDBs: one PodDisruptionBudget per Deployment, selecting its pods.
func checkPDBs(t *testing.T, s *rendered) {
	t.Helper()
	for _, d := range []deployment{s.worker, s.api} {
		var pdb struct {
			Spec struct {
				Selector       selector `yaml:"selector"`
				MaxUnavailable any      `yaml:"maxUnavailable"`
				MinAvailable   any      `yaml:"minAvailable"`
			} `yaml:"spec"`
		}
		s.one(t, "PodDisruptionBudget", d.Metadata.Name).decode(t, &pdb)
		require.True(t, pdb.Spec.MaxUnavailable != nil || pdb.Spec.MinAvailable != nil)
		require.Equal(t, d.Spec.Selector.MatchLabels, pdb.Spec.Selector.MatchLabels, "the PDB %s selects the Deployment's pods", d.Metadata.Name)
	}
}

// checkScaledObject: KEDA scales the worker Deployment, never to zero, on
// a Prometheus query of the fleet's pending and active tasks whose metric
// names, labels and label values a real worker exports (exported), one
// replica per worker.concurrency of them.
func checkScaledObject(t *testing.T, s *rendered, exported scrape) {
	t.Helper()
	require.Empty(t, s.all("HorizontalPodAutoscaler"), "KEDA makes its own HPA")
	var so struct {
		Spec struct {
			ScaleTargetRef  struct{ Name string } `yaml:"scaleTargetRef"`
			MinReplicaCount *int                  `yaml:"minReplicaCount"`
			MaxReplicaCount *int                  `yaml:"maxReplicaCount"`
			Triggers        []struct {
				Type     string            `yaml:"type"`
				Metadata map[string]string `yaml:"metadata"`
			} `yaml:"triggers"`
		} `yaml:"spec"`
	}
	s.one(t, "ScaledObject", workerName).decode(t, &so)
	require.Equal(t, workerName, so.Spec.ScaleTargetRef.Name)
	// Scheduled, retrying, deferred and restarting tasks are moved to
	// pending by a running worker only, which also computes the gauges:
	// zero workers would strand them.
	require.True(t, so.Spec.MinReplicaCount != nil && *so.Spec.MinReplicaCount >= 1, "minReplicaCount ≥ 1")
	require.Len(t, so.Spec.Triggers, 1, "one trigger: the fleet's work")
	tr := so.Spec.Triggers[0]
	require.Equal(t, "prometheus", tr.Type)
	md := tr.Metadata
	require.NotEmpty(t, md["serverAddress"])
	require.Equal(t, strconv.Itoa(s.cfg.Worker.Concurrency), md["threshold"],
		"desired replicas = (pending + active) / threshold: the threshold is the tasks one replica runs, worker.concurrency")
	checkQuery(t, md["query"], exported)
	require.Contains(t, md["query"], "agentq_queue_tasks")
	states := selectorValues(t, md["query"], "agentq_queue_tasks", "state")
	require.ElementsMatch(t, []string{"pending", "active"}, states, "the query sums pending and active")
}

// checkQuery: every agentq series the query names is one a real worker
// exports, with the labels it groups by and the label values it selects.
func checkQuery(t *testing.T, query string, exported scrape) {
	t.Helper()
	names := queryMetric.FindAllString(query, -1)
	require.NotEmpty(t, names, "the query %q names a worker metric", query)
	for _, name := range names {
		labels, ok := exported[name]
		require.True(t, ok, "the query's %s is exported by a worker (%v)", name, keysOf(exported))
		for _, m := range querySelector.FindAllStringSubmatch(query, -1) {
			if m[1] != name {
				continue
			}
			for _, sel := range queryMatcher.FindAllStringSubmatch(m[2], -1) {
				for _, v := range strings.Split(sel[2], "|") {
					require.True(t, labels[sel[1]][v], "%s{%s=%q} is exported (%v)", name, sel[1], v, keysOf(labels[sel[1]]))
				}
			}
		}
	}
	for _, m := range queryBy.FindAllStringSubmatch(query, -1) {
		for _, l := range strings.Split(m[1], ",") {
			found := false
			for _, name := range names {
				_, has := exported[name][strings.TrimSpace(l)]
				found = found || has
			}
			require.True(t, found, "the query groups by %q, a label of %v", l, names)
		}
	}
}

// selectorValues are the values the query's selector of name matches for
// label (a =~ alternation or an =).
func selectorValues(t *testing.T, query, name, label string) []string {
	t.Helper()
	var out []string
	for _, m := range querySelector.FindAllStringSubmatch(query, -1) {
		for _, sel := range queryMatcher.FindAllStringSubmatch(m[2], -1) {
			if m[1] == name && sel[1] == label {
				out = append(out, strings.Split(sel[2], "|")...)
			}
		}
	}
	return out
}

// The parts of a PromQL query the check reads: metric names, a metric's
// selector, a selector's matchers (= and =~), a by clause's labels.
var (
	queryMetric   = regexp.MustCompile(`agentq_[a-z_]+`)
	querySelector = regexp.MustCompile(`(agentq_[a-z_]+)\{([^}]*)\}`)
	queryMatcher  = regexp.MustCompile(`([a-z_]+)=~?"([^"]*)"`)
	queryBy       = regexp.MustCompile(`by \(([^)]*)\)`)
)

// checkHPA: a plain HPA scales the worker Deployment; metric names other
// than resources are the worker's.
func checkHPA(t *testing.T, s *rendered, metrics map[string]bool) {
	t.Helper()
	require.Empty(t, s.all("ScaledObject"), "no KEDA object without KEDA")
	var hpa struct {
		Spec struct {
			ScaleTargetRef struct{ Kind, Name string } `yaml:"scaleTargetRef"`
			MinReplicas    *int                        `yaml:"minReplicas"`
			Metrics        []struct {
				Type     string `yaml:"type"`
				Resource *struct {
					Name string `yaml:"name"`
				} `yaml:"resource"`
				Pods *struct {
					Metric struct{ Name string } `yaml:"metric"`
				} `yaml:"pods"`
			} `yaml:"metrics"`
		} `yaml:"spec"`
	}
	s.one(t, "HorizontalPodAutoscaler", workerName).decode(t, &hpa)
	require.Equal(t, "Deployment", hpa.Spec.ScaleTargetRef.Kind)
	require.Equal(t, workerName, hpa.Spec.ScaleTargetRef.Name)
	require.True(t, hpa.Spec.MinReplicas != nil && *hpa.Spec.MinReplicas >= 1)
	require.NotEmpty(t, hpa.Spec.Metrics)
	for _, m := range hpa.Spec.Metrics {
		switch m.Type {
		case "Resource":
			require.NotNil(t, m.Resource)
			require.Contains(t, s.workerPod.Resources.Requests, m.Resource.Name, "a utilization target needs a request")
		case "Pods":
			require.True(t, metrics[m.Pods.Metric.Name], "HPA metric %s is the worker's", m.Pods.Metric.Name)
		default:
			t.Fatalf("unexpected HPA metric type %s", m.Type)
		}
	}
}

// workerOpsPaths asks a real worker's ops handler (on a real Redis) for
// the paths the manifests use and returns each one's status.
func workerOpsPaths(t *testing.T) map[string]int {
	t.Helper()
	srv := redistest.Start(t)
	cfg := config.Default()
	cfg.Redis.URL = srv.URL()
	w, err := worker.New(cfg, srv.Client())
	require.NoError(t, err)
	out := map[string]int{}
	for _, p := range []string{"/healthz", "/readyz", "/metrics", "/no-such-path"} {
		req := httptest.NewRequestWithContext(context.Background(), http.MethodGet, p, nil)
		rec := httptest.NewRecorder()
		w.OpsHandler().ServeHTTP(rec, req)
		out[p] = rec.Code
	}
	require.Equal(t, http.StatusNotFound, out["/no-such-path"], "the handler tells served paths from others")
	return out
}

// scrape is what a worker's /metrics says: metric name -> label name ->
// the values seen.
type scrape map[string]map[string]map[string]bool

// workerExports runs a real worker (on a real Redis, its queue known to
// asynq) until its /metrics shows the fleet's gauges, which it computes at
// start as the only worker of its fleet, and returns what /metrics said.
func workerExports(t *testing.T) scrape {
	t.Helper()
	srv := redistest.Start(t)
	cfg := config.Default()
	cfg.Redis.URL = srv.URL()
	cfg.Worker.HTTPAddr = "" // the handler is asked directly
	require.NoError(t, broker.RegisterQueues(context.Background(), srv.Client(), "default"))
	w, err := worker.New(cfg, srv.Client())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	deadline := time.Now().Add(30 * time.Second)
	for {
		rec := httptest.NewRecorder()
		w.OpsHandler().ServeHTTP(rec, httptest.NewRequestWithContext(context.Background(), http.MethodGet, "/metrics", nil))
		require.Equal(t, http.StatusOK, rec.Code)
		out := parseScrape(rec.Body.String())
		if out["agentq_queue_tasks"]["queue"]["default"] {
			return out
		}
		require.True(t, time.Now().Before(deadline), "the worker exports the fleet's gauges within 30s")
		time.Sleep(20 * time.Millisecond)
	}
}

// parseScrape reads the Prometheus text format's samples.
func parseScrape(text string) scrape {
	out := scrape{}
	for _, line := range strings.Split(text, "\n") {
		m := scrapeLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		labels := out[m[1]]
		if labels == nil {
			labels = map[string]map[string]bool{}
			out[m[1]] = labels
		}
		for _, l := range scrapeLabel.FindAllStringSubmatch(m[2], -1) {
			if labels[l[1]] == nil {
				labels[l[1]] = map[string]bool{}
			}
			labels[l[1]][l[2]] = true
		}
	}
	return out
}

// A sample line of the text format (name, then its labels), and one label.
var (
	scrapeLine  = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? `)
	scrapeLabel = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
)

// workerMetricNames are the Name fields of the Prometheus collectors a
// worker registers (prometheus.*Opts literals): the worker package's and
// those of the packages whose services it runs.
func workerMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, dir := range []string{"worker", "internal/delivery", "internal/webhook", "internal/schedule"} {
		addMetricNames(t, filepath.Join("..", "..", filepath.FromSlash(dir)), out)
	}
	require.Contains(t, out, "agentq_attempts_total", "the parse finds the worker's metrics")
	return out
}

// addMetricNames adds to out the metric names in dir's non-test Go
// files: every string literal that is a whole agentq_ name (a collector's
// Opts.Name, or the name handed to a helper that builds the collector).
func addMetricNames(t *testing.T, dir string, out map[string]bool) {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, 0)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			if name, err := strconv.Unquote(lit.Value); err == nil && metricName.MatchString(name) {
				out[name] = true
			}
			return true
		})
	}
}

// metricName is a whole agentq metric name.
var metricName = regexp.MustCompile(`^agentq_[a-z_]+$`)

// configVars are the variables the config reads when a worker runs it:
// ${VAR} in HTTP agents' headers and in Redis passwords (found by running
// the code with a recording getenv, not by reading the text).
func configVars(t *testing.T, c *config.Config) map[string]bool {
	t.Helper()
	rec := recorder{}
	for _, a := range c.Agents {
		if a.HTTP != nil {
			a.HTTP.ExpandHeaders(rec.getenv)
		}
	}
	rdb, err := c.Redis.NewClient(rec.getenv) // lazy: dials nothing
	require.NoError(t, err)
	require.NoError(t, rdb.Close())
	_, err = configx.Hooks(c, rec.getenv)
	require.NoError(t, err)
	return rec
}

// codeVars are the variables any agentq process reads: the config's, the
// Redis URL and token, the tracing ones, and what exec agents pass through.
func codeVars(cfg map[string]bool) map[string]bool {
	// GOMEMLIMIT is read by the Go runtime (the API's limit is sized
	// with it: docs/operations.md, "Sizing the API").
	rec := recorder{config.EnvRedisURL: true, api.EnvToken: true, "GOMEMLIMIT": true}
	tracing.Enabled(rec.getenv)
	config.Default().ApplyEnv(rec.getenv)
	for v := range cfg {
		rec[v] = true
	}
	return rec
}

// recorder is a getenv that records the names it is asked for.
type recorder map[string]bool

func (r recorder) getenv(name string) string { r[name] = true; return "" }

// exampleSecretKeys are the keys of secret.example.yaml's Secret.
func exampleSecretKeys(t *testing.T) map[string]bool {
	t.Helper()
	data, err := os.ReadFile("secret.example.yaml")
	require.NoError(t, err)
	var sec struct {
		Kind       string `yaml:"kind"`
		Metadata   struct{ Name string }
		StringData map[string]string `yaml:"stringData"`
	}
	require.NoError(t, yaml.Unmarshal(data, &sec))
	require.Equal(t, "Secret", sec.Kind)
	require.Equal(t, secretName, sec.Metadata.Name)
	out := map[string]bool{}
	for k := range sec.StringData {
		out[k] = true
	}
	return out
}

func flagValueOr(args []string, flag string) string {
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
	}
	return ""
}

func flagValue(t *testing.T, args []string, flag string) string {
	t.Helper()
	v := flagValueOr(args, flag)
	require.NotEmpty(t, v, "%v: %s", args, flag)
	return v
}

func addrPort(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	require.NoError(t, err, addr)
	n, err := strconv.Atoi(p)
	require.NoError(t, err, addr)
	return n
}

func subset(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return len(sel) > 0
}

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// The subset of the Kubernetes objects the checks read.

type object struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	raw []byte
}

func (o object) decode(t *testing.T, v any) {
	t.Helper()
	require.NoError(t, yaml.Unmarshal(o.raw, v), "%s %s", o.Kind, o.Metadata.Name)
}

type selector struct {
	MatchLabels map[string]string `yaml:"matchLabels"`
}

type deployment struct {
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Spec struct {
		Replicas *int     `yaml:"replicas"`
		Selector selector `yaml:"selector"`
		Template struct {
			Metadata struct {
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"metadata"`
			Spec struct {
				TerminationGracePeriodSeconds *int64 `yaml:"terminationGracePeriodSeconds"`
				SecurityContext               *struct {
					RunAsNonRoot   *bool  `yaml:"runAsNonRoot"`
					RunAsUser      *int64 `yaml:"runAsUser"`
					SeccompProfile struct {
						Type string `yaml:"type"`
					} `yaml:"seccompProfile"`
				} `yaml:"securityContext"`
				Containers []container `yaml:"containers"`
				Volumes    []struct {
					Name      string `yaml:"name"`
					ConfigMap *struct {
						Name string `yaml:"name"`
					} `yaml:"configMap"`
				} `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type container struct {
	Name  string   `yaml:"name"`
	Args  []string `yaml:"args"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	Env             []envVar `yaml:"env"`
	LivenessProbe   *probe   `yaml:"livenessProbe"`
	ReadinessProbe  *probe   `yaml:"readinessProbe"`
	SecurityContext *struct {
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
		ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
		RunAsNonRoot             *bool `yaml:"runAsNonRoot"`
		Capabilities             struct {
			Drop []string `yaml:"drop"`
			Add  []string `yaml:"add"`
		} `yaml:"capabilities"`
	} `yaml:"securityContext"`
	Resources struct {
		Requests map[string]string `yaml:"requests"`
	} `yaml:"resources"`
	VolumeMounts []mount `yaml:"volumeMounts"`
}

type mount struct {
	Name      string `yaml:"name"`
	MountPath string `yaml:"mountPath"`
}

type probe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port any    `yaml:"port"`
	} `yaml:"httpGet"`
}

type service struct {
	Spec struct {
		Selector map[string]string `yaml:"selector"`
		Ports    []struct {
			Port       int `yaml:"port"`
			TargetPort any `yaml:"targetPort"`
		} `yaml:"ports"`
	} `yaml:"spec"`
}

// port resolves a probe's or Service's port (a number or a port name of
// c) to a number.
func (c container) port(t *testing.T, p any) int {
	t.Helper()
	switch v := p.(type) {
	case int:
		return v
	case string:
		for _, cp := range c.Ports {
			if cp.Name == v {
				return cp.ContainerPort
			}
		}
		t.Fatalf("%s: no port named %q", c.Name, v)
	}
	t.Fatalf("%s: port %v (%T)", c.Name, p, p)
	return 0
}

// env returns c's variable name.
func (c container) env(name string) (envVar, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e, true
		}
	}
	return envVar{}, false
}

type envVar struct {
	Name      string `yaml:"name"`
	Value     string `yaml:"value"`
	ValueFrom *struct {
		SecretKeyRef *struct {
			Name     string `yaml:"name"`
			Key      string `yaml:"key"`
			Optional bool   `yaml:"optional"`
		} `yaml:"secretKeyRef"`
	} `yaml:"valueFrom"`
}
