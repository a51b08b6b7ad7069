package security

import (
	"strings"
	"testing"

	"github.com/shoalmq/shoal/wire"
)

func TestParseRole(t *testing.T) {
	for _, r := range []Role{RoleRead, RoleWrite, RoleAdmin} {
		got, err := ParseRole(r.String())
		if err != nil || got != r {
			t.Errorf("ParseRole(%q) = %v, %v", r.String(), got, err)
		}
	}
	for _, s := range []string{"", "Admin", "root", "reader", " read", "admin-token-0123456789"} {
		if r, err := ParseRole(s); err == nil {
			t.Errorf("ParseRole(%q) = %v, want an error", s, r)
		}
	}
	// A line holding two tokens must not print one.
	if _, err := ParseRole("admin-token-0123456789"); err == nil || strings.Contains(err.Error(), "token") {
		t.Errorf("the error shows the field: %v", err)
	}
	if s := Role(0).String(); s != "Role(0)" {
		t.Errorf("Role(0) = %q", s)
	}
	if s := Role(7).String(); s != "Role(7)" {
		t.Errorf("Role(7) = %q", s)
	}
}

// TestRoleAllows: every role against every kind a frame can carry. The
// client requests readers may make, Produce for writers, everything else
// (the metadata writes, the operators' requests, the peers' kinds and
// kinds not yet known) for admins alone; a role that is none of the three
// allows nothing.
func TestRoleAllows(t *testing.T) {
	read := map[wire.Kind]bool{
		wire.KindLookup: true, wire.KindFetch: true, wire.KindMembers: true, wire.KindShards: true, wire.KindStatus: true,
		wire.KindShardLeaders: true, wire.KindWatch: true, wire.KindListTopics: true,
	}
	for _, k := range []wire.Kind{wire.KindAssign, wire.KindRevoke, wire.KindUpdatePartition, wire.KindDrain,
		wire.KindUndrain, wire.KindTransferLeader, wire.KindRemoveNode} {
		if read[k] {
			t.Fatalf("%v in the readers' list", k)
		}
	}
	for k := range 256 {
		kind := wire.Kind(k)
		for _, r := range []Role{RoleRead, RoleWrite, RoleAdmin} {
			want := r == RoleAdmin || read[kind] || (kind == wire.KindProduce && r == RoleWrite)
			if got := r.Allows(kind); got != want {
				t.Errorf("%v allows %v: %v, want %v", r, kind, got, want)
			}
		}
		for _, r := range []Role{0, RoleAdmin + 1, 255} {
			if r.Allows(kind) {
				t.Errorf("%v allows %v", r, kind)
			}
		}
	}
}
