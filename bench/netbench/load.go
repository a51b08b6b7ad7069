package main

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/shoalmq/shoal/netio"
	"github.com/shoalmq/shoal/wire"
)

const warmup = 300 * time.Millisecond

var epoch = time.Now()

func nanotime() int64 { return int64(time.Since(epoch)) }

// procCPU is the user+system CPU time of pid from /proc (clock ticks of
// 10ms, plenty over a case of seconds).
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(fields) < 13 {
		return 0, errors.New("short /proc stat")
	}
	ut, _ := strconv.ParseInt(fields[11], 10, 64)
	st, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond, nil
}

// procSyscalls is the number of read and write system calls pid made
// (syscr and syscw of /proc/pid/io).
func procSyscalls(pid string) (r, w int64) {
	b, err := os.ReadFile("/proc/" + pid + "/io")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "syscr":
			r = n
		case "syscw":
			w = n
		}
	}
	return r, w
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// genMode selects the request/response load generator: "epoll" (one OS
// thread, driveEpoll) or "goroutines" (a goroutine per connection,
// driveConn).
var genMode = "epoll"

// rrCase runs closed-loop request/response: each connection keeps depth
// requests in flight, writing as many new ones as answers it read.
func rrCase(impl string, conns, depth int, d time.Duration, profile string) (result, error) {
	srv, addr, err := startServer(impl, profile)
	if err != nil {
		return result{}, err
	}
	defer srv.stop()
	cmd := srv.cmd
	ncs := make([]net.Conn, conns)
	for i := range ncs {
		nc, err := dialImpl(impl, addr)
		if err != nil {
			return result{}, err
		}
		defer nc.Close()
		ncs[i] = nc
	}
	var measuring, stop atomic.Bool
	lat := make([][]int64, conns)
	ops := make([]int64, conns)
	errs := make(chan error, conns)
	var wg sync.WaitGroup
	switch genMode {
	case "epoll":
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, n, err := driveEpoll(ncs, depth, &measuring, &stop)
			copy(lat, l)
			copy(ops, n)
			errs <- err
		}()
	default:
		for i, nc := range ncs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l, n, err := driveConn(nc, depth, &measuring, &stop)
				lat[i], ops[i] = l, n
				errs <- err
			}()
		}
	}
	time.Sleep(warmup)
	cpu0, err := procCPU(cmd.Process.Pid)
	if err != nil {
		return result{}, err
	}
	if profile != "" {
		stop, err := startProfile(profile + ".gen")
		if err != nil {
			return result{}, err
		}
		defer stop()
	}
	gen0 := selfCPU()
	pid := strconv.Itoa(cmd.Process.Pid)
	sr0, sw0 := procSyscalls(pid)
	gr0, gw0 := procSyscalls("self")
	t0 := time.Now()
	measuring.Store(true)
	time.Sleep(d)
	measuring.Store(false)
	elapsed := time.Since(t0)
	cpu1, _ := procCPU(cmd.Process.Pid)
	gen1 := selfCPU()
	sr1, sw1 := procSyscalls(pid)
	gr1, gw1 := procSyscalls("self")
	load := loadAvg()
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return result{}, err
		}
	}
	var total int64
	for _, n := range ops {
		total += n
	}
	sorted := sortedLatencies(lat)
	r := result{
		Impl: impl, Conns: conns, Depth: depth, Ops: total,
		OpsPerS:   float64(total) / elapsed.Seconds(),
		P50us:     percentile(sorted, 0.50),
		P99us:     percentile(sorted, 0.99),
		CPUScope:  "server process",
		DurationS: elapsed.Seconds(), PayloadSize: payloadSize,
		LoadAvg: load,
	}
	if total > 0 {
		r.CPUusPerOp = float64((cpu1 - cpu0).Microseconds()) / float64(total)
		r.ClientCPUusPerOp = float64((gen1 - gen0).Microseconds()) / float64(total)
		r.ServerReadsPerOp = float64(sr1-sr0) / float64(total)
		r.ServerWritesPerOp = float64(sw1-sw0) / float64(total)
		r.GenReadsPerOp = float64(gr1-gr0) / float64(total)
		r.GenWritesPerOp = float64(gw1-gw0) / float64(total)
	}
	return r, nil
}

func driveConn(nc net.Conn, depth int, measuring, stop *atomic.Bool) ([]int64, int64, error) {
	r := bufio.NewReaderSize(nc, 64<<10)
	w := bufio.NewWriterSize(nc, 64<<10)
	reqs := newInflight(depth)
	var req [wire.HeaderSize + payloadSize]byte
	send := func() error {
		b, start := wire.BeginFrame(req[:0], wire.KindLookup, reqs.add())
		reqs.stamp(nanotime())
		b = append(b, make([]byte, payloadSize)...)
		b, _ = wire.EndFrame(b, start)
		_, err := w.Write(b)
		return err
	}
	for range depth {
		if err := send(); err != nil {
			return nil, 0, err
		}
	}
	if err := w.Flush(); err != nil {
		return nil, 0, err
	}
	lat := make([]int64, 0, 1<<16)
	var ops int64
	var scratch []byte
	outstanding := depth
	for outstanding > 0 {
		h, s, err := readFrame(r, scratch)
		if err != nil {
			return nil, 0, err
		}
		scratch = s
		outstanding--
		if h.Kind != wire.KindAssignment || h.Length != payloadSize {
			return nil, 0, fmt.Errorf("answer %v with %d payload bytes", h.Kind, h.Length)
		}
		sent, ok := reqs.done(h.RequestID)
		if !ok {
			return nil, 0, fmt.Errorf("answer id %d: not an answer to an outstanding request", h.RequestID)
		}
		if measuring.Load() {
			lat = append(lat, nanotime()-sent)
			ops++
		}
		if stop.Load() {
			if err := w.Flush(); err != nil { // requests written but not yet flushed
				return nil, 0, err
			}
			continue // drain what is in flight
		}
		if err := send(); err != nil {
			return nil, 0, err
		}
		outstanding++
		if r.Buffered() < wire.HeaderSize+payloadSize {
			if err := w.Flush(); err != nil {
				return nil, 0, err
			}
		}
	}
	return lat, ops, nil
}

const peerPayload = 100

// peerCase sends 100-byte frames one way as fast as the sender can and
// counts what the receiver gets; every 64th frame carries its send time
// for the one-way latency.
func peerCase(impl string, d time.Duration, profile string) (result, error) {
	var received atomic.Int64
	var measuring, stop atomic.Bool
	var latMu sync.Mutex
	var lat []int64
	onFrame := func(payload []byte) {
		if !measuring.Load() {
			return
		}
		n := received.Add(1)
		if n%64 == 0 {
			l := nanotime() - int64(binary.LittleEndian.Uint64(payload))
			latMu.Lock()
			lat = append(lat, l)
			latMu.Unlock()
		}
	}
	frame := func(dst []byte) []byte {
		b, start := wire.BeginFrame(dst[:0], wire.KindRaftBatch, 0)
		b = binary.LittleEndian.AppendUint64(b, uint64(nanotime()))
		b = append(b, make([]byte, peerPayload-8)...)
		b, _ = wire.EndFrame(b, start)
		return b
	}
	var dropped atomic.Int64
	var sender func() error
	var cleanup func()
	switch impl {
	case "netio", "netio-tls", "netio-goroutines":
		var recvTLS, sendTLS *tls.Config
		if impl == "netio-tls" {
			var err error
			if recvTLS, sendTLS, err = peerTLSPair(); err != nil {
				return result{}, err
			}
		}
		recv, err := netio.New(netio.Config{
			ClusterID: benchCluster, NodeID: "b", PeerAddr: "127.0.0.1:0", Logger: quiet(),
			Handler: netio.HandlerFunc(func(_ *netio.Conn, _ wire.Header, f []byte) bool {
				onFrame(f[wire.HeaderSize:])
				return true
			}),
			PeerTLS: recvTLS, DialTLS: sendTLS, Goroutines: impl == "netio-goroutines",
		})
		if err != nil {
			return result{}, err
		}
		send, err := netio.New(netio.Config{
			ClusterID: benchCluster, NodeID: "a", Logger: quiet(),
			Handler: netio.HandlerFunc(func(*netio.Conn, wire.Header, []byte) bool { return true }),
			DialTLS: sendTLS, Goroutines: impl == "netio-goroutines",
		})
		if err != nil {
			_ = recv.Close()
			return result{}, err
		}
		send.SetPeerAddr("b", recv.PeerAddr())
		cleanup = func() { _ = send.Close(); _ = recv.Close() }
		sender = func() error {
			buf := make([]byte, 0, wire.HeaderSize+peerPayload)
			for !stop.Load() {
				switch err := send.Send("b", frame(buf)); {
				case err == nil:
				case errors.Is(err, netio.ErrQueueFull):
					// Wait for room without spinning, as the net
					// sender does, blocked in write.
					dropped.Add(1)
					time.Sleep(50 * time.Microsecond)
				default:
					return err
				}
			}
			return nil
		}
	case "net":
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return result{}, err
		}
		go func() {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			defer nc.Close()
			r := bufio.NewReaderSize(nc, 64<<10)
			var scratch []byte
			for {
				_, s, err := readFrame(r, scratch)
				if err != nil {
					return
				}
				scratch = s
				onFrame(s)
			}
		}()
		nc, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			_ = ln.Close()
			return result{}, err
		}
		cleanup = func() { _ = nc.Close(); _ = ln.Close() }
		sender = func() error {
			w := bufio.NewWriterSize(nc, 64<<10)
			buf := make([]byte, 0, wire.HeaderSize+peerPayload)
			for !stop.Load() {
				if _, err := w.Write(frame(buf)); err != nil {
					return err
				}
			}
			return w.Flush()
		}
	}
	defer cleanup()
	errc := make(chan error, 1)
	go func() { errc <- sender() }()
	time.Sleep(warmup)
	if profile != "" {
		stop, err := startProfile(profile)
		if err != nil {
			return result{}, err
		}
		defer stop()
	}
	cpu0 := selfCPU()
	t0 := time.Now()
	measuring.Store(true)
	time.Sleep(d)
	measuring.Store(false)
	elapsed := time.Since(t0)
	cpu1 := selfCPU()
	load := loadAvg()
	stop.Store(true)
	if err := <-errc; err != nil {
		return result{}, err
	}
	n := received.Load()
	latMu.Lock()
	sorted := sortedLatencies([][]int64{lat})
	latMu.Unlock()
	r := result{
		Case: "peer_oneway_100B", Impl: impl, Conns: 1, Ops: n,
		OpsPerS:   float64(n) / elapsed.Seconds(),
		P50us:     percentile(sorted, 0.50),
		P99us:     percentile(sorted, 0.99),
		CPUScope:  "whole process (sender and receiver)",
		DurationS: elapsed.Seconds(), Dropped: dropped.Load(), PayloadSize: peerPayload,
		LoadAvg: load,
	}
	if n > 0 {
		r.CPUusPerOp = float64((cpu1 - cpu0).Microseconds()) / float64(n)
	}
	return r, nil
}
