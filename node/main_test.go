package node

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// gnet's package-level worker pool (ants) lives for the process.
		goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).purgeStaleWorkers"),
		goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).ticktock"),
		// Pebble's process-wide disk-health and cache goroutines.
		goleak.IgnoreAnyFunction("github.com/cockroachdb/pebble/v2/internal/cache.(*shard).releaseLoop"),
	)
}
