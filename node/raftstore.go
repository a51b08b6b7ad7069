package node

import (
	"bufio"
	"io"
	"sync/atomic"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/shardstore"
)

// localShard is the store's slot for what belongs to this node rather than
// to a raft group: the topics it was told to own and the birth marker. It
// is never a raft shard (shard ids are below Config.Shards).
const localShard = ^uint64(0)

// raftStore adapts shardstore to raftmux.Storage. A raftmux round builds one
// Batch over all its shards and commits it with one fsync.
type raftStore struct {
	s       *shardstore.Store
	commits atomic.Uint64
	fsyncs  atomic.Uint64
}

var _ raftmux.Storage = (*raftStore)(nil)

func (r *raftStore) Storage(shard uint64) (raft.Storage, error) {
	rs, err := r.s.Storage(shard)
	if err != nil {
		return nil, err
	}
	return rs, nil
}

func (r *raftStore) NewBatch() raftmux.Batch { return &countedBatch{Batch: r.s.NewBatch(), r: r} }

func (r *raftStore) Applied(shard uint64) (uint64, error) { return r.s.Applied(shard) }

func (r *raftStore) Compact(shard, idx uint64) error { return r.s.Compact(shard, idx) }

func (r *raftStore) SnapshotData(shard uint64) (*raftpb.SnapshotMetadata, io.ReadCloser, error) {
	sr, err := r.s.SnapshotData(shard)
	if err != nil {
		return nil, nil, err
	}
	return sr.Meta(), sr, nil
}

// ApplySnapshot passes an empty data stream (raftmux bootstraps a group
// with one) to the store as "no data", which is how the store spells it.
func (r *raftStore) ApplySnapshot(shard uint64, snap *raftpb.Snapshot, data io.Reader) error {
	if data == nil {
		return r.s.ApplySnapshot(shard, snap, nil)
	}
	br := bufio.NewReader(data)
	if _, err := br.Peek(1); err == io.EOF {
		return r.s.ApplySnapshot(shard, snap, nil)
	}
	return r.s.ApplySnapshot(shard, snap, br)
}

func (r *raftStore) DeleteShard(shard uint64) error { return r.s.DeleteShard(shard) }

func (r *raftStore) Shards() ([]uint64, error) {
	all := r.s.Shards()
	out := all[:0:0]
	for _, s := range all {
		if s != localShard {
			out = append(out, s)
		}
	}
	return out, nil
}

// countedBatch counts group commits and fsyncs for Stats.
type countedBatch struct {
	*shardstore.Batch
	r *raftStore
}

func (b *countedBatch) Commit(sync bool) error {
	b.r.commits.Add(1)
	if sync {
		b.r.fsyncs.Add(1)
	}
	return b.Batch.Commit(sync)
}
