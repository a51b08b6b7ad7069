package netio

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkUDPReceive compares one recvfrom per datagram (batch=1) with
// recvmmsg batches on the same socket setup. A sender goroutine sends
// 256-byte datagrams (SWIM-sized) over 127.0.0.1, either as fast as it can
// (flood: the receive queue is never empty) or one at a time, each after
// the previous one was read (sparse: what a lightly loaded node sees).
// ns/op is wall time per datagram received; rx-cpu-ns/op is the CPU time
// of the receiving thread per datagram.
func BenchmarkUDPReceive(b *testing.B) {
	for _, mode := range []string{"flood", "sparse"} {
		for _, batch := range []int{1, 8, 32} {
			b.Run(fmt.Sprintf("%s/batch=%d", mode, batch), func(b *testing.B) {
				benchUDPReceive(b, mode == "flood", batch)
			})
		}
	}
}

func threadCPU() time.Duration {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_THREAD, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchUDPReceive(b *testing.B, flood bool, batch int) {
	rx, err := ListenUDP("127.0.0.1:0", UDPConfig{ReadBatch: batch})
	if err != nil {
		b.Fatal(err)
	}
	defer rx.Close()
	tx, err := ListenUDP("127.0.0.1:0", UDPConfig{})
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Close()
	msg := make([]byte, 256)
	to := rx.LocalAddr()
	var stop atomic.Bool
	ready := make(chan struct{}, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if !flood {
			for range ready {
				_ = tx.WriteTo(msg, to)
			}
			return
		}
		for !stop.Load() {
			_ = tx.WriteTo(msg, to)
		}
	}()
	defer func() {
		stop.Store(true)
		close(ready)
		wg.Wait()
	}()
	buf := make([]byte, 2048)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := threadCPU()
	for range b.N {
		if !flood {
			ready <- struct{}{}
		}
		if err := rx.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
			b.Fatal(err)
		}
		n, from, err := rx.ReadFrom(buf)
		if err != nil || n != len(msg) || from != tx.LocalAddr() {
			b.Fatalf("read %d from %v: %v", n, from, err)
		}
	}
	cpu := threadCPU() - cpu0
	b.StopTimer()
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "rx-cpu-ns/op")
}
