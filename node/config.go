package node

import (
	"time"

	"github.com/shoalmq/shoal/node/config"
	"github.com/shoalmq/shoal/node/reconcile"
	"github.com/shoalmq/shoal/swim"
	"github.com/shoalmq/shoal/wire"
)

// Config configures a Node; node/config holds its fields, their defaults
// and its checks.
type Config = config.Config

// Defaults and bounds of Config (node/config).
const (
	DefaultShards          = config.DefaultShards
	DefaultReplicas        = config.DefaultReplicas
	DefaultBootstrapExpect = config.DefaultBootstrapExpect
	MaxShards              = config.MaxShards
	DefaultHandoffTimeout  = config.DefaultHandoffTimeout
	DefaultStoreLogSyncGap = config.DefaultStoreLogSyncGap
)

// DefaultSplits is Config.Splits's default for a cluster born with the
// default shard count (node/config).
func DefaultSplits(fast bool) reconcile.SplitConfig { return config.DefaultSplits(fast) }

// ErrConfig is wrapped by every Config validation error.
var ErrConfig = config.ErrConfig

// testHooks let a test stop a node at a chosen point, as a scheduler or
// SIGSTOP would, and put faults on its network (faultnet).
type testHooks struct {
	// afterAppend runs in a produce between the append and the lease
	// check that precedes the acknowledgement.
	afterAppend func(topic string)
	// handoffChunkBytes, when not 0, replaces records.MaxChunkBytes;
	// answerPull, when set, decides whether a RecordsPull is answered.
	handoffChunkBytes uint32
	answerPull        func(topic string) bool
	// beforeServe runs before every request served off an event loop.
	beforeServe func()
	// peerIn decides the fate of every peer frame of kind this node
	// receives from node from.
	peerIn func(from string, kind wire.Kind) frameFate
	// swimConn and pushPull wrap SWIM's socket and push-pull transport.
	swimConn func(swim.PacketConn) swim.PacketConn
	pushPull func(swim.PushPullTransport) swim.PushPullTransport
}

// frameFate is what becomes of a received peer frame under a test's
// faults: delivered once per delay (none: dropped), after hold is closed
// when it is not nil (and then judged again).
type frameFate struct {
	delays []time.Duration
	hold   <-chan struct{}
}
