package node

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"sync"
	"testing"
	"time"

	"github.com/shoalmq/shoal/client"
)

// BenchmarkMoveCost is what moving a dead owner's topics costs the
// cluster: four nodes, 256 shards, b.N topics assigned to n4, then n4
// closed (its connections drop at once, as a kill's do) and the time
// until the three others hold every one of them. cpu-µs/topic is the CPU
// of the whole process (the survivors; no client is busy) from the close
// until then, per topic; opened-ms that time. Run it with a fixed count,
// -benchtime 10000x or 100000x, and -count N in turns with the code it is
// compared with. -cpuprofile profiles the whole benchmark, the assigns
// included; MOVECOST_PROFILE=FILE profiles the move alone.
func BenchmarkMoveCost(b *testing.B) {
	c := startClusterWith(b, 4, func(cfg *Config) { cfg.Shards = assignCostShards })
	cl := seedsClient(b, c.nodes[:3])
	victim := c.nodes[3]
	ctx := context.Background()
	var wg sync.WaitGroup
	work := make(chan int, b.N)
	for i := range b.N {
		work <- i
	}
	close(work)
	errs := make(chan error, assignCostInFlight)
	for range assignCostInFlight {
		wg.Go(func() {
			for i := range work {
				if _, err := cl.Assign(ctx, fmt.Sprintf("move-cost-%d", i), client.AssignOptions{Owner: victim.ID()}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	held := func(ns []*Node) int {
		sum := 0
		for _, n := range ns {
			sum += n.Stats().TopicsOwned
		}
		return sum
	}
	waitUntil(b, 30*time.Second, "the victim holds its topics", func() bool { return held(c.nodes[3:]) == b.N })
	survivors := c.nodes[:3]
	before := held(survivors)
	if path := os.Getenv("MOVECOST_PROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
		defer func() {
			pprof.StopCPUProfile()
			_ = f.Close()
		}()
	}
	sent := func() (opens, closes uint64) {
		for _, n := range survivors {
			st := n.Stats()
			opens += st.OpensSent
			closes += st.ClosesSent
		}
		return opens, closes
	}
	opens0, closes0 := sent()
	cpu0, t0 := processCPU(), time.Now()
	b.ResetTimer()
	if err := victim.Close(); err != nil {
		b.Fatal(err)
	}
	for held(survivors) < before+b.N {
		if time.Since(t0) > 2*time.Minute {
			for _, n := range survivors {
				st := n.Stats()
				b.Logf("%s: holds %d, owes %d ownership messages, %d fences", n.ID(), st.TopicsOwned, st.OwnershipPending, st.OwnershipFences)
			}
			b.Fatalf("after 2m the survivors hold %d of the %d topics", held(survivors)-before, b.N)
		}
		time.Sleep(5 * time.Millisecond)
	}
	b.StopTimer()
	opens, closes := sent()
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/topic")
	b.ReportMetric(float64(opens-opens0)/float64(b.N), "opens/topic")
	b.ReportMetric(float64(closes-closes0)/float64(b.N), "closes/topic")
	b.ReportMetric(float64(time.Since(t0).Milliseconds()), "opened-ms")
}
