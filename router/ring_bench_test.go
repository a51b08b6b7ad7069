package router

import (
	"fmt"
	"testing"
)

// BenchmarkReplicas is one shard's walk (RF 3, 3 racks).
func BenchmarkReplicas(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		for _, v := range []int{0, DefaultVNodes} {
			r := mustRing(b, testMembers(n, 3), v)
			b.Run(fmt.Sprintf("walk=%v/nodes=%d", r.Walk(), n), func(b *testing.B) {
				b.ReportAllocs()
				dst := make([]string, 0, 3)
				for i := 0; b.Loop(); i++ {
					dst = r.Replicas(uint32(i)&4095, 3, dst[:0])
				}
			})
		}
	}
}

// BenchmarkPlacement is what a membership change costs: a new ring and the
// whole table of 10,000 shards.
func BenchmarkPlacement(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		for _, v := range []int{0, DefaultVNodes} {
			ms := testMembers(n, 3)
			w := "rendezvous"
			if v > 0 {
				w = "tokens"
			}
			b.Run(fmt.Sprintf("walk=%s/nodes=%d", w, n), func(b *testing.B) {
				clk := startCPU()
				defer clk.report(b)
				for b.Loop() {
					mustRing(b, ms, v).Placement(10000, 3)
				}
			})
		}
	}
}
