package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"sync"
	"syscall"
	"time"

	"github.com/shoalmq/shoal/internal/memtrim"
	"github.com/shoalmq/shoal/internal/version"
	"github.com/shoalmq/shoal/node"
	"github.com/shoalmq/shoal/node/security"
)

// leaveTimeout bounds a graceful stop: leaving SWIM, handing off the
// shards this node leads and closing Pebble. Past it the node is closed
// as it is, which loses nothing acknowledged but makes the others wait for
// the failure detector.
const leaveTimeout = 20 * time.Second

// nodeConfig is the node.Config a command line asks for.
func (o *nodeOptions) nodeConfig(logger *slog.Logger) node.Config {
	return node.Config{
		ID:              o.id,
		Rack:            o.rack,
		DataDir:         o.dataDir,
		ClientAddr:      o.clientAddr,
		PeerAddr:        o.peerAddr,
		SwimAddr:        o.swimAddr,
		Join:            o.join,
		BootstrapExpect: o.bootstrapExpect,
		Shards:          o.shards,
		Splits:          o.splits.cfg,
		Replicas:        o.replicas,
		ClusterID:       o.clusterID,
		Secret:          o.secret,
		Security:        security.Security{TLS: o.tls, ClientTokens: o.tokens, SwimKeys: o.swimKeys},
		SwimPreset:      o.swimPreset,
		Logger:          logger,

		MetadataSyncInterval: o.metadataSync,
		LeaseDuration:        o.leaseDuration,
		HandoffTimeout:       o.handoffTimeout,
		LeaseRenewInterval:   o.leaseRenew,
		MaxClockDrift:        o.maxClockDrift,
		StoreMemTableBytes:   uint64(o.memtableMiB) << 20,
		StoreLogSyncRuntime:  o.logSync == "runtime",
		StoreLogSyncGap:      logSyncGap(o.logSyncGap),
		NetLoops:             o.netLoops,
		ChangeLogLen:         o.changeLogLen,
	}
}

// reloadCredentials rereads the client token and SWIM key files a node was
// started with and hands them to it; a file that does not read or parse
// leaves the node as it was, and says why.
func reloadCredentials(n *node.Node, o *nodeOptions, logger *slog.Logger) {
	if o.tokenFile == "" && o.swimKeyFile == "" {
		logger.Warn("SIGHUP: nothing to reload (no --client-token-file, no --swim-key-file)")
		return
	}
	if o.tokenFile != "" {
		toks, err := readTokens(o.tokenFile)
		if err == nil {
			err = n.SetClientTokens(toks)
		}
		if err != nil {
			logger.Error("SIGHUP: client tokens kept as they were", "file", o.tokenFile, "err", err)
		}
	}
	if o.swimKeyFile != "" {
		keys, err := readSwimKeys(o.swimKeyFile)
		if err == nil {
			err = n.SetSwimKeys(keys)
		}
		if err != nil {
			logger.Error("SIGHUP: SWIM keys kept as they were", "file", o.swimKeyFile, "err", err)
		}
	}
}

// runNode runs one node until ctx is cancelled, then leaves the cluster
// gracefully.
func runNode(ctx context.Context, o *nodeOptions, stderr io.Writer) error {
	start := time.Now()
	logger := newLogger(stderr, o.logFormat, o.logLevel)
	if o.cpuProfile != "" {
		stop, err := startCPUProfile(o.cpuProfile, cpuProfileLimit)
		if err != nil {
			return err
		}
		defer stop()
	}
	followCPULimit(ctx, logger)
	if o.trimAtRest > 0 {
		memtrim.Follow(ctx, o.trimAtRest, memtrim.DefaultRule, logger.With("node", o.id))
	}
	n, err := node.New(o.nodeConfig(logger)) // the node adds its own node=ID
	logger = logger.With("node", o.id)
	if err != nil {
		return err
	}
	logger.Info("node opened", "after", time.Since(start).Round(time.Millisecond))
	var ms *metricsServer
	if o.metricsAddr != "" {
		// Started before the node so that /healthz answers while it joins.
		ms, err = startMetrics(o.metricsAddr, logger, []*node.Node{n}, o.pprof)
		if err != nil {
			_ = n.Close()
			return err
		}
		logger.Info("metrics listening", "addr", ms.addr())
	}
	// The node's own lifetime is not ctx: a signal must lead to Leave, not
	// tear the node down under it.
	if err := n.Start(context.WithoutCancel(ctx)); err != nil {
		_ = n.Close()
		ms.close()
		return fmt.Errorf("start: %w", err)
	}
	// SIGHUP rereads the client token and SWIM key files.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	ready := n.Ready()
	for done := false; !done; {
		select {
		case <-ready:
			st := n.Status()
			client, peer, swimAddr := n.Addrs()
			logger.Info("node ready", "after", time.Since(start).Round(time.Millisecond),
				"version", version.Get().Version, "generation", st.Generation, "members_alive", st.MembersAlive,
				"shards_hosted", st.ShardsHosted, "shards_led", st.ShardsLed, "topics_owned", st.TopicsOwned,
				"client_addr", client, "peer_addr", peer, "swim_addr", swimAddr)
			ready = nil
		case <-hup:
			reloadCredentials(n, o, logger)
		case <-ctx.Done():
			done = true
		}
	}

	logger.Info("leaving the cluster")
	lctx, cancel := context.WithTimeout(context.Background(), leaveTimeout)
	leaveErr := n.Leave(lctx)
	cancel()
	closeErr := n.Close()
	ms.close()
	if err := errors.Join(leaveErr, closeErr); err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	logger.Info("node stopped")
	return nil
}

// logSyncGap is node.Config.StoreLogSyncGap for --store-log-sync-gap,
// where 0 means none.
func logSyncGap(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// defaultTrimAtRest: how often --trim-at-rest looks at the heap.
const defaultTrimAtRest = 30 * time.Second

// cpuProfileLimit: how long --cpu-profile profiles at most.
const cpuProfileLimit = 60 * time.Second

// startCPUProfile writes a CPU profile to path from now until limit has
// passed or stop is called, whichever comes first.
func startCPUProfile(path string, limit time.Duration) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpu-profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("--cpu-profile: %w", err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			pprof.StopCPUProfile()
			_ = f.Close()
		})
	}
	time.AfterFunc(limit, stop)
	return stop, nil
}
