package node

import (
	"github.com/shoalmq/shoal/node/metasync"
	"github.com/shoalmq/shoal/swim"
)

// MetadataVersions reports the node's versions of the cluster metadata
// (package metasync says what each counts).
func (n *Node) MetadataVersions() metasync.Versions { return n.msync.Versions() }

// newMetaSync is the node's side of the cluster metadata sync, bound to
// its peers, SWIM, clock and random source through syncEnv.
func (n *Node) newMetaSync() (*metasync.Sync, error) {
	return metasync.New(metasync.Config{
		Self:        n.cfg.ID,
		Seeds:       n.cfg.Join,
		PullTimeout: n.cfg.MetadataPullTimeout,
		Interval:    n.cfg.MetadataSyncInterval,
		Leaders:     n.leaders,
		Env:         syncEnv{parts{n}},
		Logger:      n.log,
	})
}

// syncEnv is what the metadata sync touches of the node. It reads the
// node's network and SWIM when called: both are set after New.
type syncEnv struct{ parts }

func (e syncEnv) Members() []swim.Member              { return e.n.swim.Members() }
func (e syncEnv) Join(seeds []string)                 { e.n.swim.Join(seeds) }
func (e syncEnv) SetMetadataVersion(kind, ver uint64) { e.n.swim.SetMetadataVersion(kind, ver) }
func (e syncEnv) IntN(k int) int                      { return e.n.randIntN(k) }
func (e syncEnv) Merged()                             { e.n.eventsTask.Kick() }

// metadataSynced reports whether the node completed its first full sync of
// the cluster metadata, or is alone (metasync.Sync.Synced).
func (n *Node) metadataSynced() bool {
	return n.msync.Synced(n.view.Load().Live, n.startedAt)
}
