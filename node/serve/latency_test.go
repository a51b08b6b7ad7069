package serve

import (
	"slices"
	"testing"
)

// The op label's values name every client request kind, in snake case.
func TestRequestOpsNameEveryRequestKind(t *testing.T) {
	if ops := RequestOps(); ops[0] != "assign" || ops[2] != "update_partition" || !slices.Contains(ops, "transfer_leader") ||
		!slices.Contains(ops, "shard_leaders") || !slices.Contains(ops, "watch") || !slices.Contains(ops, "list_topics") {
		t.Errorf("RequestOps() = %v", ops)
	}
}
