// Package buildinfo is the version and VCS revision every agentq binary
// reports: `--version`, agentq_build_info{version,revision} and the
// worker registry's version field.
package buildinfo

import (
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// version is agentq's version: one number with clients/VERSION (a test
// holds them equal). A release build may set it with
// -ldflags "-X github.com/agentq/agentq/internal/buildinfo.version=…".
var version = "1.0.0"

// revision, when set with -ldflags "-X
// github.com/agentq/agentq/internal/buildinfo.revision=…" (a build without
// the .git directory, such as the Docker image's), is the VCS revision;
// empty: the one Go stamped into the binary.
var revision = ""

// Unknown is Revision's answer when the binary carries no VCS revision
// (go test binaries, builds outside a git checkout).
const Unknown = "unknown"

// Version is agentq's version, such as "1.0.0".
func Version() string { return version }

// Revision is the VCS revision the binary was built from (the ldflags
// override, else Go's vcs.revision), or Unknown.
func Revision() string {
	if revision != "" {
		return revision
	}
	return vcsRevision(debug.ReadBuildInfo())
}

// vcsRevision is bi's vcs.revision setting, or Unknown.
func vcsRevision(bi *debug.BuildInfo, ok bool) string {
	if !ok {
		return Unknown
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && s.Value != "" {
			return s.Value
		}
	}
	return Unknown
}

// String is what `<binary> --version` prints (without the newline):
// "<binary> <version> (<revision>)".
func String(binary string) string { return binary + " " + Version() + " (" + Revision() + ")" }

// MetricName is the build-info gauge's name.
const MetricName = "agentq_build_info"

// Collector is the gauge agentq_build_info{version,revision}, always 1,
// for a process's metrics registry.
func Collector() prometheus.Collector {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: MetricName, Help: "Always 1; its labels are the version and VCS revision of the running binary.",
	}, []string{"version", "revision"})
	g.WithLabelValues(Version(), Revision()).Set(1)
	return g
}
