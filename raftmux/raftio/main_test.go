package raftio_test

import (
	"testing"

	"go.uber.org/goleak"
)

// gnet's package-level worker pool (ants) is created when gnet is imported
// and keeps its purge and clock goroutines for the life of the process; no
// transport starts or owns them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).purgeStaleWorkers"),
		goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).ticktock"),
	)
}
