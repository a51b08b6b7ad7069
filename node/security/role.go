package security

import (
	"errors"

	"github.com/shoalmq/shoal/internal/enum"
	"github.com/shoalmq/shoal/wire"
)

// Role is what a client token allows.
type Role uint8

const (
	// RoleRead: Lookup, Fetch, Members, Shards, Status, ShardLeaders,
	// Watch, ListTopics.
	RoleRead Role = iota + 1
	// RoleWrite: what RoleRead allows, and Produce.
	RoleWrite
	// RoleAdmin: every request (Assign, Revoke, UpdatePartition, and the
	// operators' Drain, Undrain, TransferLeader, RemoveNode too).
	RoleAdmin
)

var roleNames = enum.New("Role", map[Role]string{RoleRead: "read", RoleWrite: "write", RoleAdmin: "admin"})

func (r Role) String() string { return roleNames.Name(r) }

// ParseRole reads a role's name: admin, write or read.
func ParseRole(s string) (Role, error) {
	if r, ok := roleNames.Parse(s); ok {
		return r, nil
	}
	// The field is not shown: a line holding two tokens must not print one.
	return 0, errors.New("the role must be admin, write or read")
}

// Allows reports whether the role may make a request of kind k. A kind
// it does not know is for admins alone, and a role that is none of the
// three allows nothing.
func (r Role) Allows(k wire.Kind) bool {
	if r < RoleRead || r > RoleAdmin {
		return false
	}
	switch k {
	case wire.KindLookup, wire.KindFetch, wire.KindMembers, wire.KindShards, wire.KindStatus, wire.KindShardLeaders, wire.KindWatch, wire.KindListTopics:
		return r >= RoleRead
	case wire.KindProduce:
		return r >= RoleWrite
	}
	return r >= RoleAdmin
}
