package netio

import (
	"context"
	"errors"
	"net"
	"runtime"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/shoalmq/shoal/wire"
)

func servePushPull(t *testing.T, cfg PushPullConfig) *PushPull {
	t.Helper()
	srv, err := ListenPushPull("127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- srv.Serve(func(req []byte) ([]byte, error) { return append([]byte("re:"), req...), nil })
	}()
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Error(err)
		}
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return srv
}

// TestPushPullHandshakeChecksClusterAndSecret: an exchange runs only
// between nodes of one cluster holding one secret.
func TestPushPullHandshakeChecksClusterAndSecret(t *testing.T) {
	// Registered first, so it runs after the servers' cleanups.
	t.Cleanup(func() { goleak.VerifyNone(t, leakOptions...) })
	srv := servePushPull(t, PushPullConfig{NodeID: "srv", ClusterID: 7, Secret: []byte("s3cret"), Timeout: time.Second})
	for _, tc := range []struct {
		name    string
		cfg     PushPullConfig
		succeed bool
	}{
		{"same cluster and secret", PushPullConfig{NodeID: "a", ClusterID: 7, Secret: []byte("s3cret")}, true},
		{"another secret", PushPullConfig{NodeID: "b", ClusterID: 7, Secret: []byte("other")}, false},
		{"no secret", PushPullConfig{NodeID: "c", ClusterID: 7}, false},
		{"another cluster", PushPullConfig{NodeID: "d", ClusterID: 8, Secret: []byte("s3cret")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Timeout = time.Second
			cli, err := ListenPushPull("127.0.0.1:0", tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer cli.Close()
			reply, err := cli.Exchange(context.Background(), srv.Addr().String(), []byte("state"))
			if tc.succeed != (err == nil) || (tc.succeed && string(reply) != "re:state") {
				t.Fatalf("reply %q, err %v; want success %v", reply, err, tc.succeed)
			}
			if !tc.succeed && !errors.Is(err, ErrPushPull) {
				t.Fatalf("err %v does not wrap ErrPushPull", err)
			}
		})
	}
}

// heapInUse is the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// TestPushPullDeclarationsCostNoMemory opens 64 connections that each
// declare a 16 MiB push-pull frame, as a peer before any authentication
// (with a secret: straight after connecting; without one: after a Hello):
// the server's heap grows by less than maxGrowth, connections past
// MaxConns are refused at accept, and once they are gone an exchange goes
// through.
func TestPushPullDeclarationsCostNoMemory(t *testing.T) {
	// Registered first, so it runs after the servers' cleanups.
	t.Cleanup(func() { goleak.VerifyNone(t, leakOptions...) })
	const conns = 64
	const maxGrowth = 4 << 20
	declaration := rawHeader(wire.ProtocolVersion, wire.KindPushPull, wire.MaxFrame)
	for _, tc := range []struct {
		name   string
		secret []byte
	}{
		{"with a secret", []byte("s3cret")},
		{"insecure", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := servePushPull(t, PushPullConfig{NodeID: "srv", Secret: tc.secret, Timeout: 10 * time.Second, HandshakeTimeout: 10 * time.Second})
			hello := wire.Hello{Version: wire.ProtocolVersion, Role: wire.RolePeer, NodeID: []byte("mallory")}
			before := heapInUse()
			var open []net.Conn
			defer func() {
				for _, c := range open {
					c.Close()
				}
			}()
			for range conns {
				c, err := net.Dial("tcp", srv.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				open = append(open, c)
				msg := declaration
				if tc.secret == nil {
					msg = append(frameOf(wire.KindHello, wire.AppendHello(nil, &hello)), declaration...)
				}
				if _, err := c.Write(msg); err != nil {
					t.Fatal(err)
				}
			}
			waitFor(t, "the listener to refuse what it cannot serve", func() bool { return srv.Refused()+srv.HandshakeFailures() >= conns-uint64(DefaultPushPullConns) })
			if grown := int64(heapInUse()) - int64(before); grown > maxGrowth {
				t.Fatalf("heap grew by %d bytes for %d declarations (bound %d)", grown, conns, maxGrowth)
			}
			for _, c := range open {
				c.Close()
			}
			open = nil
			cli, err := ListenPushPull("127.0.0.1:0", PushPullConfig{NodeID: "cli", Secret: tc.secret, Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer cli.Close()
			waitFor(t, "an exchange to go through", func() bool {
				reply, err := cli.Exchange(context.Background(), srv.Addr().String(), []byte("state"))
				return err == nil && string(reply) == "re:state"
			})
		})
	}
}
