package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	httppprof "net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/shoalmq/shoal/node"
)

// metricsServer serves /metrics, /healthz and /readyz for the nodes of
// this process over HTTP.
type metricsServer struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{} // closed when Serve returned
}

// Limits of the metrics server: it answers scrapers and probes, so small
// requests and short timeouts are enough.
const (
	metricsReadHeaderTimeout = 5 * time.Second
	metricsWriteTimeout      = 30 * time.Second
	metricsMaxHeaderBytes    = 16 << 10
	metricsShutdownTimeout   = 2 * time.Second
	// With --pprof, a CPU profile or trace is written for as long as it
	// was asked to run (30 s by default): up to a minute.
	pprofWriteTimeout = 70 * time.Second
)

// startMetrics listens on addr and serves, for the given nodes:
//   - /metrics: Prometheus metrics (each series labelled node="ID"), plus
//     the Go runtime's and the process's;
//   - /healthz: 200 while the process runs;
//   - /readyz: 200 once every node is ready to serve, 503 before, and
//     503 while a shard replica is halted at an entry it could not apply;
//   - with pprof, Go's profiles under /debug/pprof/ (net/http/pprof).
func startMetrics(addr string, logger *slog.Logger, nodes []*node.Node, pprof bool) (*metricsServer, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), newBuildInfo())
	for _, n := range nodes {
		if err := reg.Register(newNodeCollector(n)); err != nil {
			return nil, fmt.Errorf("metrics: register: %w", err)
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		ErrorHandling: promhttp.ContinueOnError,
	}))
	if pprof {
		mux.HandleFunc("/debug/pprof/", httppprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", httppprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", httppprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", httppprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", httppprof.Trace)
	}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		for _, n := range nodes {
			select {
			case <-n.Ready():
			default:
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write([]byte("not ready\n"))
				return
			}
			if h := n.Halted(); len(h) > 0 {
				// A replica stopped at an entry it could not apply: its
				// state would diverge from its group's. An operator must
				// look (the log names the shard and the entry).
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = fmt.Fprintf(w, "not ready: %d shard replicas halted (first: %v)\n", len(h), &h[0])
				return
			}
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	writeTimeout := metricsWriteTimeout
	if pprof {
		writeTimeout = pprofWriteTimeout
	}
	m := &metricsServer{
		srv: &http.Server{
			Handler:           mux,
			ReadHeaderTimeout: metricsReadHeaderTimeout,
			WriteTimeout:      writeTimeout,
			MaxHeaderBytes:    metricsMaxHeaderBytes,
			ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		},
		ln:   ln,
		done: make(chan struct{}),
	}
	go func() {
		defer close(m.done)
		if err := m.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("metrics server stopped", "err", err)
		}
	}()
	return m, nil
}

// addr is the address the server listens on (the real port when the one
// asked for was 0).
func (m *metricsServer) addr() string { return m.ln.Addr().String() }

// close stops the server and waits for it; a nil server is a no-op.
func (m *metricsServer) close() {
	if m == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), metricsShutdownTimeout)
	defer cancel()
	if err := m.srv.Shutdown(ctx); err != nil {
		_ = m.srv.Close()
	}
	<-m.done
}
