package meta_test

import (
	"testing"

	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/wire"
)

// A name or count the client protocol accepts must be one the state
// machine accepts, and the other way round.
func TestLimitsMatchTheClientProtocol(t *testing.T) {
	for _, tt := range []struct {
		name       string
		meta, wire int
	}{
		{"topic length", meta.MaxTopicLen, wire.MaxTopicLen},
		{"node id length", meta.MaxNodeIDLen, wire.MaxNodeIDLen},
		{"partitions", meta.MaxPartitions, wire.MaxPartitions},
	} {
		if tt.meta != tt.wire {
			t.Errorf("%s: meta allows %d, wire %d", tt.name, tt.meta, tt.wire)
		}
	}
}
