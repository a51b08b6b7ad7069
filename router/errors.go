package router

import "errors"

// Sentinel errors; returned wrapped, test with errors.Is.
var (
	// ErrEmptyID reports a ring member without a node id.
	ErrEmptyID = errors.New("router: empty node id")
	// ErrDuplicateMember reports two ring members with the same node id.
	ErrDuplicateMember = errors.New("router: duplicate node id")
	// ErrConfig reports an invalid configuration value.
	ErrConfig = errors.New("router: invalid config")
	// ErrShardRange reports a shard index outside the table.
	ErrShardRange = errors.New("router: shard out of range")
	// ErrEmptyLeader reports a leader update without a node id.
	ErrEmptyLeader = errors.New("router: empty leader id")
)
