// Package version reads what the Go toolchain recorded in a binary about
// how it was built: the module version, the commit, the Go version. Both
// binaries print it for --version, and the node exports it as the metric
// shoal_build_info.
package version

import (
	"runtime/debug"
	"strings"
)

// devel is the module version of a binary built from a work tree rather
// than installed at a tagged version.
const devel = "(devel)"

// shortCommitLen is how many hex digits of a commit are shown.
const shortCommitLen = 12

// Set at link time by builds that have no VCS information to stamp, such
// as a container build without the .git directory:
//
//	go build -ldflags "-X github.com/shoalmq/shoal/internal/version.linkVersion=v1.2.0 -X github.com/shoalmq/shoal/internal/version.linkCommit=0123456789ab" ./cmd/shoal
//
// Each wins over what the build information says.
var linkVersion, linkCommit string

// Info is how a binary was built.
type Info struct {
	Version   string // module version, e.g. v1.2.0; "devel" for a build from a work tree
	Commit    string // first 12 hex digits of the commit, "+dirty" when the tree had changes; "unknown" when not recorded
	GoVersion string // e.g. go1.26.8
}

// Get reads the running binary's build information.
func Get() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = &debug.BuildInfo{}
	}
	return withLinked(fromBuildInfo(bi), linkVersion, linkCommit)
}

// withLinked is in with the version and commit set at link time, if any.
func withLinked(in Info, version, commit string) Info {
	if version != "" {
		in.Version = version
	}
	if commit != "" {
		in.Commit = commit
	}
	return in
}

// fromBuildInfo turns the toolchain's record into an Info. A build from a
// work tree has the module version "(devel)" (before Go 1.24) or a
// pseudo-version naming the commit with "+dirty" for changes; an installed
// module has its tag.
func fromBuildInfo(bi *debug.BuildInfo) Info {
	in := Info{Version: bi.Main.Version, Commit: "unknown", GoVersion: bi.GoVersion}
	var rev string
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev != "" {
		in.Commit = rev[:min(len(rev), shortCommitLen)]
		if dirty {
			in.Commit += "+dirty"
		}
	}
	switch {
	case in.Version == "" || in.Version == devel:
		in.Version = "devel"
	default:
		// A pseudo-version built from a dirty tree ends in "+dirty",
		// which Commit already says.
		in.Version = strings.TrimSuffix(in.Version, "+dirty")
	}
	if in.GoVersion == "" {
		in.GoVersion = "unknown"
	}
	return in
}

// String is the line --version prints: "PROG VERSION (COMMIT, GOVERSION)".
func (in Info) String(prog string) string {
	return prog + " " + in.Version + " (" + in.Commit + ", " + in.GoVersion + ")"
}
