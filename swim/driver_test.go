package swim_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/shoalmq/shoal/netio"
	"github.com/shoalmq/shoal/swim"
)

func startDriver(t *testing.T, id, addr string, seeds []string, gen uint64) *swim.Driver {
	t.Helper()
	c := swim.LocalConfig()
	c.NodeID, c.ClusterID, c.Secret, c.Generation = id, 77, []byte("cluster secret"), gen
	c.Rack = "r" + id[len(id)-1:]
	var d *swim.Driver
	var err error
	for range 50 {
		d, err = swim.Listen(addr, swim.DriverConfig{Node: c, Seeds: seeds}, netio.UDPConfig{})
		if err == nil {
			return d
		}
		time.Sleep(100 * time.Millisecond) // the old port is still being released
	}
	t.Fatal(err)
	return nil
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestDriversOnLoopback(t *testing.T) {
	defer goleak.VerifyNone(t)
	const n = 32
	drivers := make([]*swim.Driver, n)
	var mu sync.Mutex
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, d := range drivers {
			if d != nil {
				d.Close()
			}
		}
	}()
	drivers[0] = startDriver(t, "n0", "127.0.0.1:0", nil, 1)
	seed := drivers[0].Self().SwimAddr
	for i := 1; i < n; i++ {
		drivers[i] = startDriver(t, fmt.Sprintf("n%d", i), "127.0.0.1:0", []string{seed}, 1)
	}
	everyone := func(skip int, check func(d *swim.Driver) error) func() error {
		return func() error {
			for i, d := range drivers {
				if i == skip {
					continue
				}
				if err := check(d); err != nil {
					return fmt.Errorf("n%d: %w", i, err)
				}
			}
			return nil
		}
	}
	waitFor(t, "join", 20*time.Second, everyone(-1, func(d *swim.Driver) error {
		if got := d.NumLive(); got != n-1 {
			return fmt.Errorf("%d live", got)
		}
		return nil
	}))

	const victim = 5
	addr := drivers[victim].Self().SwimAddr
	drivers[victim].Close()
	drivers[victim] = nil
	waitFor(t, "crash detected", 20*time.Second, everyone(victim, func(d *swim.Driver) error {
		if m, _ := d.Member("n5"); m.State != swim.StateDead {
			return fmt.Errorf("n5 is %v", m.State)
		}
		return nil
	}))

	drivers[victim] = startDriver(t, "n5", addr, []string{seed}, 2)
	waitFor(t, "restart seen", 20*time.Second, everyone(-1, func(d *swim.Driver) error {
		if d.Self().ID == "n5" {
			if d.NumLive() != n-1 {
				return fmt.Errorf("restarted node sees %d live", d.NumLive())
			}
			return nil
		}
		m, _ := d.Member("n5")
		if m.State != swim.StateAlive || m.Generation < 2 {
			return fmt.Errorf("n5 is %v generation %d", m.State, m.Generation)
		}
		return nil
	}))
	st := drivers[0].Stats()
	if st.PacketsIn == 0 || st.Core.Probes == 0 || st.PushPullsServed == 0 {
		t.Fatalf("counters not moving: %+v", st)
	}
	if st.Core.DropAuth != 0 || st.Core.DropMalformed != 0 {
		t.Fatalf("drops within one cluster: %+v", st.Core)
	}
}
