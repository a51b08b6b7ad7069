package sim

import (
	"testing"
	"time"
)

// BenchmarkSeed runs one seed of a 5-node, 64-shard cluster over 60
// virtual seconds (40 under faults, 16 calm, 4 for the requests in flight
// to end), checkers included.
func BenchmarkSeed(b *testing.B) {
	var virtual time.Duration
	for i := range b.N {
		res, err := Run(Config{Seed: uint64(i + 1), Faulty: 40 * time.Second, Calm: 16 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		if res.Failed() {
			b.Fatal(res.Report())
		}
		virtual += res.Virtual
	}
	b.ReportMetric(virtual.Seconds()/float64(b.N), "virtual-s/op")
}
