package version

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	rev := "0123456789abcdef0123456789abcdef01234567"
	for _, tc := range []struct {
		name string
		bi   debug.BuildInfo
		want Info
	}{
		{"work tree, old toolchain", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "false"}}},
			Info{"devel", "0123456789ab", "go1.26.8"}},
		{"dirty pseudo-version", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261201203000-0123456789ab+dirty"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "true"}}},
			Info{"v0.0.0-20261201203000-0123456789ab", "0123456789ab+dirty", "go1.26.8"}},
		{"installed tag, no vcs", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.0"}},
			Info{"v1.2.0", "unknown", "go1.26.8"}},
		{"nothing recorded", debug.BuildInfo{}, Info{"devel", "unknown", "unknown"}},
	} {
		if got := fromBuildInfo(&tc.bi); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestGetAndString(t *testing.T) {
	in := Get()
	if in.GoVersion == "" || in.Version == "" || in.Commit == "" {
		t.Fatalf("empty field in %+v", in)
	}
	s := in.String("shoal")
	if !strings.HasPrefix(s, "shoal "+in.Version+" (") || !strings.HasSuffix(s, ", "+in.GoVersion+")") {
		t.Fatalf("String = %q", s)
	}
}

func TestLinkedWin(t *testing.T) {
	in := Info{"devel", "unknown", "go1.26.8"}
	if got := withLinked(in, "v1.2.0", "0123456789ab"); got != (Info{"v1.2.0", "0123456789ab", "go1.26.8"}) {
		t.Fatalf("got %+v", got)
	}
	if got := withLinked(in, "", ""); got != in {
		t.Fatalf("got %+v", got)
	}
}
