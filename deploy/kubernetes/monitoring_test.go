package kubernetes_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/api"
	"github.com/agentq/agentq/internal/buildinfo"
)

// TestKustomizationsPinScrapeSpread renders the base and every overlay and
// checks what an SRE's first week met: every image is pinned to the
// version the binaries carry (never latest, never untagged); a PodMonitor
// per Deployment scrapes a named port of its pods at a path the process
// serves (the worker's ops handler, the API's /metrics route); both
// Deployments spread over zones and nodes.
func TestKustomizationsPinScrapeSpread(t *testing.T) {
	t.Parallel()
	workerPaths := workerOpsPaths(t)
	apiPaths := apiServedPaths(t)
	for _, k := range kustomizations {
		t.Run(subtestName(k.dir), func(t *testing.T) {
			t.Parallel()
			s := setup(t, k.dir)
			checkImages(t, s)
			checkPodMonitor(t, s, workerName, s.worker, s.workerPod, addrPort(t, s.cfg.Worker.HTTPAddr), workerPaths)
			checkPodMonitor(t, s, apiName, s.api, s.apiPod, addrPort(t, flagValue(t, s.apiPod.Args, "--http")), apiPaths)
			checkAnnotations(t, s.api, s.apiPod, apiPaths)
			checkSpread(t, s)
		})
	}
}

// apiServedPaths asks the API's handler (no Redis needed) for the paths a
// scrape may use and returns each one's status; /metrics must be a route
// of the table that needs no token and serve the API's series.
func apiServedPaths(t *testing.T) map[string]int {
	t.Helper()
	require.True(t, slices.ContainsFunc(api.Routes(), func(r api.Route) bool {
		return r.Method == http.MethodGet && r.Path == "/metrics" && !r.Auth
	}), "GET /metrics is a route of the API that needs no token")
	h := api.New(nil, nil, api.Options{Token: "a-token-the-scrape-does-not-send"}).Handler()
	out := map[string]int{}
	for _, p := range []string{"/metrics", "/no-such-path"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequestWithContext(context.Background(), http.MethodGet, p, nil))
		out[p] = rec.Code
		if p == "/metrics" {
			require.Contains(t, rec.Body.String(), api.MetricWaiters, "the API's series")
		}
	}
	require.Equal(t, http.StatusNotFound, out["/no-such-path"], "the handler tells served paths from others")
	return out
}

// checkImages: every container of every Deployment runs an image with a
// tag (or a digest), never latest; agentq's own image is tagged with the
// version its binaries carry (clients/VERSION).
func checkImages(t *testing.T, s *rendered) {
	t.Helper()
	for _, d := range s.all("Deployment") {
		var dep struct {
			Spec struct {
				Template struct {
					Spec struct {
						Containers     []struct{ Name, Image string } `yaml:"containers"`
						InitContainers []struct{ Name, Image string } `yaml:"initContainers"`
					} `yaml:"spec"`
				} `yaml:"template"`
			} `yaml:"spec"`
		}
		d.decode(t, &dep)
		cs := append(dep.Spec.Template.Spec.Containers, dep.Spec.Template.Spec.InitContainers...)
		require.NotEmpty(t, cs)
		for _, c := range cs {
			repo, tag, digest := splitImage(c.Image)
			require.True(t, tag != "" || digest, "%s/%s: image %q is untagged (docker would pull latest)", d.Metadata.Name, c.Name, c.Image)
			require.NotEqual(t, "latest", tag, "%s/%s: image %q is not pinned", d.Metadata.Name, c.Name, c.Image)
			if repo == "agentq" || strings.HasSuffix(repo, "/agentq") {
				require.True(t, digest || tag == buildinfo.Version(),
					"%s/%s: image %q is tagged with the version its binaries carry (%s, clients/VERSION)", d.Metadata.Name, c.Name, c.Image, buildinfo.Version())
			}
		}
	}
}

// splitImage splits an image reference into its repository and tag, and
// says whether it is pinned by digest.
func splitImage(ref string) (repo, tag string, digest bool) {
	if i := strings.Index(ref, "@"); i >= 0 {
		ref, digest = ref[:i], true
	}
	slash := strings.LastIndexByte(ref, '/')
	if i := strings.LastIndexByte(ref, ':'); i > slash {
		return ref[:i], ref[i+1:], digest
	}
	return ref, "", digest
}

// podMonitor is the part of a monitoring.coreos.com/v1 PodMonitor the
// checks read.
type podMonitor struct {
	APIVersion string `yaml:"apiVersion"`
	Spec       struct {
		Selector  selector `yaml:"selector"`
		Endpoints []struct {
			Port string `yaml:"port"`
			Path string `yaml:"path"`
		} `yaml:"podMetricsEndpoints"`
	} `yaml:"spec"`
}

// checkPodMonitor: the PodMonitor name selects d's pods and no other
// Deployment's; each endpoint names a port of c that is the process's
// listen port, and a path that process serves.
func checkPodMonitor(t *testing.T, s *rendered, name string, d deployment, c container, port int, served map[string]int) {
	t.Helper()
	var pm podMonitor
	s.one(t, "PodMonitor", name).decode(t, &pm)
	require.Equal(t, "monitoring.coreos.com/v1", pm.APIVersion)
	require.True(t, subset(pm.Spec.Selector.MatchLabels, d.Spec.Template.Metadata.Labels), "PodMonitor %s selects its Deployment's pods", name)
	require.Contains(t, pm.Spec.Selector.MatchLabels, "app.kubernetes.io/name", "PodMonitor %s: not every app's %s pods", name, c.Name)
	for _, other := range []deployment{s.worker, s.api} {
		if other.Metadata.Name != d.Metadata.Name {
			require.False(t, subset(pm.Spec.Selector.MatchLabels, other.Spec.Template.Metadata.Labels), "PodMonitor %s: not %s's pods", name, other.Metadata.Name)
		}
	}
	require.NotEmpty(t, pm.Spec.Endpoints)
	for _, e := range pm.Spec.Endpoints {
		require.NotEmpty(t, e.Port, "PodMonitor %s scrapes a named port", name)
		require.Equal(t, port, c.port(t, e.Port), "PodMonitor %s: port %q is the one %s listens on", name, e.Port, c.Name)
		require.Equal(t, http.StatusOK, served[e.Path], "PodMonitor %s: path %q is served by %s", name, e.Path, c.Name)
	}
}

// checkAnnotations: prometheus.io/* annotations, where kept, name the
// container's listen port and a path it serves (the worker's are checked
// by checkWorker).
func checkAnnotations(t *testing.T, d deployment, c container, served map[string]int) {
	t.Helper()
	ann := d.Spec.Template.Metadata.Annotations
	if ann["prometheus.io/scrape"] != "true" {
		return
	}
	require.Equal(t, strconv.Itoa(addrPort(t, flagValue(t, c.Args, "--http"))), ann["prometheus.io/port"])
	require.Equal(t, http.StatusOK, served[ann["prometheus.io/path"]], "the scrape path %s is served", ann["prometheus.io/path"])
}

// checkSpread: each Deployment spreads its pods over zones and nodes, with
// a selector that counts its own pods only.
func checkSpread(t *testing.T, s *rendered) {
	t.Helper()
	for _, o := range []object{s.one(t, "Deployment", workerName), s.one(t, "Deployment", apiName)} {
		var dep struct {
			Spec struct {
				Template struct {
					Metadata struct {
						Labels map[string]string `yaml:"labels"`
					} `yaml:"metadata"`
					Spec struct {
						Spread []struct {
							MaxSkew           int      `yaml:"maxSkew"`
							TopologyKey       string   `yaml:"topologyKey"`
							WhenUnsatisfiable string   `yaml:"whenUnsatisfiable"`
							LabelSelector     selector `yaml:"labelSelector"`
						} `yaml:"topologySpreadConstraints"`
					} `yaml:"spec"`
				} `yaml:"template"`
			} `yaml:"spec"`
		}
		o.decode(t, &dep)
		keys := map[string]bool{}
		for _, c := range dep.Spec.Template.Spec.Spread {
			require.Positive(t, c.MaxSkew)
			require.Contains(t, []string{"ScheduleAnyway", "DoNotSchedule"}, c.WhenUnsatisfiable)
			require.True(t, subset(c.LabelSelector.MatchLabels, dep.Spec.Template.Metadata.Labels), "%s: the spread counts its own pods", o.Metadata.Name)
			require.Contains(t, c.LabelSelector.MatchLabels, "app.kubernetes.io/component", "%s: …and not the other Deployment's", o.Metadata.Name)
			keys[c.TopologyKey] = true
		}
		require.Equal(t, map[string]bool{"topology.kubernetes.io/zone": true, "kubernetes.io/hostname": true}, keys,
			"%s: topologySpreadConstraints over zones and nodes", o.Metadata.Name)
	}
}
