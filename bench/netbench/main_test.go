package main

import (
	"bufio"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoalmq/shoal/netio"
	"github.com/shoalmq/shoal/wire"
)

// dialBench opens n handshaken connections to addr.
func dialBench(t *testing.T, addr string, n int) []net.Conn {
	t.Helper()
	ncs := make([]net.Conn, n)
	for i := range ncs {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = nc.Close() })
		if _, err := netio.ClientHandshake(nc, benchCluster, nil); err != nil {
			t.Fatal(err)
		}
		ncs[i] = nc
	}
	return ncs
}

// runEpoll drives ncs for a short measured window and returns what
// driveEpoll returned.
func runEpoll(ncs []net.Conn, depth int) ([][]int64, []int64, error) {
	var measuring, stop atomic.Bool
	measuring.Store(true)
	go func() {
		time.Sleep(100 * time.Millisecond)
		measuring.Store(false)
		stop.Store(true)
	}()
	return driveEpoll(ncs, depth, &measuring, &stop)
}

// scriptedServer listens on loopback and serves one connection: it takes
// the client's hello, answers it, then hands the connection to serve. The
// returned address is the listener's; the server is stopped and waited for
// when the test ends.
func scriptedServer(t *testing.T, serve func(nc net.Conn, r *bufio.Reader)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		r := bufio.NewReader(nc)
		if _, _, err := readFrame(r, nil); err != nil {
			return
		}
		if _, err := nc.Write(serverHello()); err != nil {
			return
		}
		serve(nc, r)
	}()
	return ln.Addr().String()
}

func TestEpollGeneratorAgainstNetServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go netServe(ln)
	const conns, depth = 3, 4
	lat, ops, err := runEpoll(dialBench(t, ln.Addr().String(), conns), depth)
	if err != nil {
		t.Fatal(err)
	}
	for i := range conns {
		if ops[i] == 0 || int64(len(lat[i])) != ops[i] {
			t.Fatalf("conn %d: %d ops, %d latencies", i, ops[i], len(lat[i]))
		}
		for _, l := range lat[i] {
			if l <= 0 {
				t.Fatalf("conn %d: latency %d ns", i, l)
			}
		}
	}
}

// TestEpollGeneratorTakesAnswersInAnyOrder: a server answering each pair
// of requests in reverse order (as workers racing each other may) is
// measured like any other.
func TestEpollGeneratorTakesAnswersInAnyOrder(t *testing.T) {
	addr := scriptedServer(t, func(nc net.Conn, r *bufio.Reader) {
		for {
			a, _, err := readFrame(r, nil)
			if err != nil {
				return
			}
			b, _, err := readFrame(r, nil)
			if err != nil {
				return
			}
			if _, err := nc.Write(response(response(nil, b.RequestID), a.RequestID)); err != nil {
				return
			}
		}
	})
	lat, ops, err := runEpoll(dialBench(t, addr, 1), 2)
	if err != nil {
		t.Fatal(err)
	}
	if ops[0] == 0 || int64(len(lat[0])) != ops[0] {
		t.Fatalf("%d ops, %d latencies", ops[0], len(lat[0]))
	}
}

// TestEpollGeneratorRejectsWrongAnswers: an answer to no outstanding
// request, a second answer to one, an answer of another kind or with a
// short payload stops the generator with an error.
func TestEpollGeneratorRejectsWrongAnswers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func(reqID uint64) []byte
	}{
		{"unknown id", func(id uint64) []byte { return response(nil, id+100) }},
		{"answered twice", func(id uint64) []byte { return response(response(nil, id), id) }},
		{"wrong kind", func(id uint64) []byte {
			b, start := wire.BeginFrame(nil, wire.KindError, id)
			b, _ = wire.EndFrame(b, start)
			return b
		}},
		{"short payload", func(id uint64) []byte {
			b, start := wire.BeginFrame(nil, wire.KindAssignment, id)
			b = append(b, 1, 2, 3)
			b, _ = wire.EndFrame(b, start)
			return b
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := scriptedServer(t, func(nc net.Conn, r *bufio.Reader) {
				h, _, err := readFrame(r, nil)
				if err != nil {
					return
				}
				_, _ = nc.Write(tc.answer(h.RequestID))
				_ = nc.SetReadDeadline(time.Now().Add(2 * time.Second))
				_, _, _ = readFrame(r, nil) // until the generator closes
			})
			_, _, err := runEpoll(dialBench(t, addr, 1), 2)
			if err == nil || !strings.Contains(err.Error(), "not an answer") && !strings.Contains(err.Error(), "payload bytes") {
				t.Fatalf("err = %v, want a bad-answer error", err)
			}
		})
	}
}

func TestPrintRatios(t *testing.T) {
	rs := []result{
		{Case: "c", Impl: "netio", Run: 1, OpsPerS: 130, P99us: 5},
		{Case: "c", Impl: "net", Run: 1, OpsPerS: 100, P99us: 6},
		{Case: "c", Impl: "netio", Run: 2, OpsPerS: 90, P99us: 9},
		{Case: "c", Impl: "net", Run: 2, OpsPerS: 100, P99us: 8},
		{Case: "c", Impl: "netio", Run: 3, OpsPerS: 120, P99us: 4},
		{Case: "c", Impl: "net", Run: 3, OpsPerS: 100, P99us: 4},
		{Case: "d", Impl: "netio", OpsPerS: 50}, // no net run: no line
	}
	var b strings.Builder
	printRatios(&b, rs, "net")
	want := "c                    netio/net ops/s: 1.30 0.90 1.20 (median 1.20); p99 at most net's in 2 of 3\n"
	if b.String() != want {
		t.Fatalf("got  %q\nwant %q", b.String(), want)
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{[]float64{1}, 1},
		{[]float64{1, 2}, 1.5},
		{[]float64{0.9, 1.1, 1.3}, 1.1},
	} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// TestInflight: answers in any order find their request and send time; an
// id answered already, never sent, or of an earlier request that used the
// same slot is refused.
func TestInflight(t *testing.T) {
	f := newInflight(3)
	a, b, c := f.add(), f.add(), f.add()
	f.stamp(10)
	if s, ok := f.done(b); !ok || s != 10 {
		t.Fatalf("done(b) = %d, %v", s, ok)
	}
	if _, ok := f.done(b); ok {
		t.Fatal("b answered twice")
	}
	d := f.add() // takes b's slot
	f.stamp(20)
	if _, ok := f.done(b); ok {
		t.Fatal("an answer to b matched d, which reuses its slot")
	}
	for _, tc := range []struct {
		id   uint64
		sent int64
	}{{c, 10}, {d, 20}, {a, 10}} {
		if s, ok := f.done(tc.id); !ok || s != tc.sent {
			t.Fatalf("done(%d) = %d, %v; want %d", tc.id, s, ok, tc.sent)
		}
	}
	if _, ok := f.done(1 << 40); ok {
		t.Fatal("an id never sent was taken")
	}
	if len(f.free) != 3 {
		t.Fatalf("%d free slots, want 3", len(f.free))
	}
}
