package load

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errBusy = errors.New("busy")

func TestRunClosedLoop(t *testing.T) {
	var calls atomic.Int64
	workers := make([]atomic.Int64, 4)
	res := Run(context.Background(), Config{
		Workers: 4, Duration: 200 * time.Millisecond, Kinds: []string{"even", "odd"},
		Code: func(err error) string { return err.Error() },
	}, func(ctx context.Context, w int) (int, error) {
		n := calls.Add(1)
		workers[w].Add(1)
		time.Sleep(time.Millisecond)
		if n%10 == 0 {
			return int(n % 2), errBusy
		}
		return int(n % 2), nil
	})
	if res.Ops == 0 || res.Ops+res.Errors != uint64(calls.Load()) {
		t.Fatalf("ops %d + errors %d, %d calls", res.Ops, res.Errors, calls.Load())
	}
	for w := range workers {
		if workers[w].Load() == 0 {
			t.Errorf("worker %d sent nothing", w)
		}
	}
	if res.Errors == 0 || len(res.ErrorCodes) != 1 || res.ErrorCodes[0].Code != "busy" || res.ErrorCodes[0].Count != res.Errors {
		t.Fatalf("errors %d by code %+v", res.Errors, res.ErrorCodes)
	}
	if len(res.ByKind) != 2 || res.ByKind[0].Name != "even" || res.ByKind[0].Errors != res.Errors ||
		res.ByKind[0].Ops+res.ByKind[1].Ops != res.Ops {
		t.Fatalf("by kind %+v", res.ByKind)
	}
	if res.Latency.Quantile(0.5) < time.Millisecond || res.Interrupted || res.Late != 0 {
		t.Fatalf("p50 %v, interrupted %v, late %d", res.Latency.Quantile(0.5), res.Interrupted, res.Late)
	}
}

// The open loop sends the requests scheduled within the duration, at
// most Rate·Duration of them, spread over the workers.
func TestRunOpenLoop(t *testing.T) {
	var mu sync.Mutex
	perWorker := map[int]int{}
	res := Run(context.Background(), Config{Workers: 3, Rate: 500, Duration: 300 * time.Millisecond},
		func(ctx context.Context, w int) (int, error) {
			mu.Lock()
			perWorker[w]++
			mu.Unlock()
			return 0, nil
		})
	if res.Ops == 0 || res.Ops+res.Unsent != 150 || res.Errors != 0 {
		t.Fatalf("ops %d errors %d unsent %d: want 150 due", res.Ops, res.Errors, res.Unsent)
	}
	if len(perWorker) != 3 || res.ByKind != nil {
		t.Fatalf("per worker %v, by kind %v", perWorker, res.ByKind)
	}
}

// A worker stuck on one request sends the ones scheduled meanwhile late,
// and their latency counts from their scheduled time.
func TestRunOpenLoopCountsTheStall(t *testing.T) {
	var n atomic.Int64
	res := Run(context.Background(), Config{Workers: 1, Rate: 100, Duration: time.Second},
		func(ctx context.Context, w int) (int, error) {
			if n.Add(1) == 1 {
				time.Sleep(100 * time.Millisecond)
			}
			return 0, nil
		})
	// Requests 1..9 were due every 10 ms while the first one took 100 ms:
	// the first and 1..5 took at least 50 ms from their scheduled time.
	if res.Late == 0 || res.Ops < 6 {
		t.Fatalf("late %d, ops %d", res.Late, res.Ops)
	}
	sixthLargest := (float64(res.Ops) - 5.5) / float64(res.Ops)
	if q := res.Latency.Quantile(sixthLargest); q < 50*time.Millisecond {
		t.Fatalf("the 6th largest latency is %v: the stall is hidden", q)
	}
}

// An interrupted run stops at once; the requests it cut short count
// neither as ops nor as errors.
func TestRunInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var started atomic.Int64
	res := Run(ctx, Config{Workers: 8, Duration: time.Hour}, func(ctx context.Context, w int) (int, error) {
		if started.Add(1) == 100 {
			cancel()
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(time.Millisecond):
			return 0, nil
		}
	})
	if !res.Interrupted || res.Errors != 0 || res.Ops == 0 || res.Ops >= uint64(started.Load()) {
		t.Fatalf("interrupted %v, ops %d, errors %d, started %d", res.Interrupted, res.Ops, res.Errors, started.Load())
	}
}

func TestRunProgress(t *testing.T) {
	var mu sync.Mutex
	var ticks []Tick
	res := Run(context.Background(), Config{
		Workers: 2, Duration: 2100 * time.Millisecond,
		Progress: func(tk Tick) {
			mu.Lock()
			ticks = append(ticks, tk)
			mu.Unlock()
		},
	}, func(ctx context.Context, w int) (int, error) {
		time.Sleep(time.Millisecond)
		return 0, nil
	})
	mu.Lock()
	defer mu.Unlock()
	if len(ticks) == 0 {
		t.Fatal("no progress")
	}
	var sum uint64
	for i, tk := range ticks {
		sum += tk.Ops
		if i > 0 && tk.Elapsed <= ticks[i-1].Elapsed {
			t.Fatalf("ticks %+v", ticks)
		}
	}
	if sum == 0 || sum > res.Ops {
		t.Fatalf("progress counted %d ops, the run %d", sum, res.Ops)
	}
}
