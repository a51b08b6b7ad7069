package node

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/shoalmq/shoal/netio"
	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/wire"
)

// errBadLeaderTable: a MetadataPush of the shard-leader table that does not
// decode.
var errBadLeaderTable = errors.New("node: malformed shard-leader table")

// leaderVersion is the version of the shard-leader table: the sum of its
// terms. Terms only rise, so a higher sum means a newer view of at least one
// shard; two nodes with equal sums usually agree.
func (n *Node) leaderVersion() uint64 {
	rows, _ := n.leaders.Snapshot(nil)
	var v uint64
	for _, r := range rows {
		v += r.Term
	}
	return v
}

// appendLeaderTable encodes the table: a uvarint count, then per known
// shard uvarint shard, uvarint term, uvarint length and the leader id.
func appendLeaderTable(b []byte, rows []router.ShardLeader) []byte {
	b = binary.AppendUvarint(b, uint64(len(rows)))
	for _, r := range rows {
		b = binary.AppendUvarint(b, uint64(r.Shard))
		b = binary.AppendUvarint(b, r.Term)
		b = binary.AppendUvarint(b, uint64(len(r.Leader)))
		b = append(b, r.Leader...)
	}
	return b
}

// mergeLeaderTable applies an encoded table, term-checked row by row.
func (n *Node) mergeLeaderTable(b []byte) error {
	cnt, k := binary.Uvarint(b)
	if k <= 0 || cnt > uint64(n.cfg.Shards) {
		return errBadLeaderTable
	}
	b = b[k:]
	for range cnt {
		shard, k1 := binary.Uvarint(b)
		if k1 <= 0 {
			return errBadLeaderTable
		}
		term, k2 := binary.Uvarint(b[k1:])
		if k2 <= 0 {
			return errBadLeaderTable
		}
		l, k3 := binary.Uvarint(b[k1+k2:])
		off := k1 + k2 + k3
		if k3 <= 0 || l == 0 || l > wire.MaxNodeIDLen || l > uint64(len(b)-off) || shard >= uint64(n.cfg.Shards) {
			return errBadLeaderTable
		}
		_, _ = n.leaders.Update(uint32(shard), string(b[off:off+int(l)]), term)
		b = b[off+int(l):]
	}
	if len(b) != 0 {
		return errBadLeaderTable
	}
	return nil
}

// pullLeaders asks peer for its shard-leader table; the answer arrives as
// a MetadataPush frame and is merged whenever it comes.
func (n *Node) pullLeaders(peer string) {
	f, start := wire.BeginFrame(nil, wire.KindMetadataPull, 0)
	f = wire.AppendMetadataPull(f, &wire.MetadataPull{Kind: wire.MetaShardLeaders, Have: n.leaderVersion()})
	if f, err := wire.EndFrame(f, start); err == nil {
		if n.net.Send(peer, f) == nil {
			n.counters.metaPulls.Add(1)
		}
	}
}

// serveMetadataPull answers a peer's pull. Only the shard-leader table is
// served here: membership, and the ring derived from it, are exchanged by
// SWIM's own push-pull.
func (n *Node) serveMetadataPull(c *netio.Conn, h wire.Header, payload []byte) {
	var m wire.MetadataPull
	if err := wire.DecodeMetadataPull(payload, &m); err != nil || m.Kind != wire.MetaShardLeaders {
		return
	}
	rows, _ := n.leaders.Snapshot(nil)
	var v uint64
	for _, r := range rows {
		v += r.Term
	}
	f, start := wire.BeginFrame(nil, wire.KindMetadataPush, h.RequestID)
	f = wire.AppendMetadataPush(f, &wire.MetadataPush{Kind: wire.MetaShardLeaders, Version: v, Data: appendLeaderTable(nil, rows)})
	if f, err := wire.EndFrame(f, start); err == nil {
		_ = c.Write(f)
	}
}

// onMetadataPush merges a pushed table; runs on a request goroutine.
func (n *Node) onMetadataPush(from string, payload []byte) {
	var m wire.MetadataPush
	if err := wire.DecodeMetadataPush(payload, &m); err != nil || m.Kind != wire.MetaShardLeaders {
		return
	}
	if err := n.mergeLeaderTable(m.Data); err != nil {
		n.log.Warn("node: metadata push", "from", from, "err", err)
		return
	}
	n.counters.metaSyncs.Add(1)
	n.lastSync.Store(time.Now().UnixNano())
	n.events.wake()
}

// metadataTick announces this node's table version and, when the last sync
// is older than the interval, pulls from a random live peer.
func (n *Node) metadataTick(v *clusterView) {
	ver := n.leaderVersion()
	if ver != n.announced {
		n.announced = ver
		n.swim.SetMetadataVersion(uint64(wire.MetaShardLeaders), ver)
	}
	if time.Since(time.Unix(0, n.lastPull)) < n.cfg.MetadataSyncInterval {
		return
	}
	var peers []string
	for _, id := range v.live {
		if id != n.cfg.ID {
			peers = append(peers, id)
		}
	}
	if len(peers) == 0 {
		return
	}
	n.lastPull = time.Now().UnixNano()
	n.pullLeaders(peers[rand.IntN(len(peers))])
}
