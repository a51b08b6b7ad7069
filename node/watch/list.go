package watch

import (
	"bytes"
	"fmt"
	"iter"
	"sync"
	"unsafe"

	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/wire"
)

// List answers a ListTopics through done, called once: the topics from
// m's cursor on, shard after shard while this node hosts them, up to m's
// limit. A follower may not have applied what its leader has
// acknowledged, so each shard is read only after a raft read index
// (answered once the replica applied up to the leader's commit): a
// listing misses nothing committed before it asked, on any replica.
// Shards are read listReadAhead at a time. A refused listing gets an
// error: ErrBadRequest, ErrUnreadable when its first shard cannot be
// read, or the store's. m, and the bytes it holds, stay the caller's and
// unchanged until done.
func (s *Server) List(m *wire.ListTopics, done func(page *wire.TopicList, err error)) {
	if sm := s.cfg.Map(); m.Shard >= uint64(sm.IDLimit()) {
		done(nil, refuse(ErrBadRequest, fmt.Sprintf("shard %d out of range: the cluster has %d shards", m.Shard, sm.Len())))
		return
	}
	if m.Limit == 0 {
		done(nil, refuse(ErrBadRequest, "a listing of no topic"))
		return
	}
	hosted, err := s.hostedShards()
	if err != nil {
		done(nil, err)
		return
	}
	s.listShards(m, hosted, m.Shard, m.After, &wire.TopicList{}, done)
}

// listShards lists the next hosted shards from shard (the first from
// after) into out, and answers once the page is full, a shard is not
// hosted here or cannot be read, or no shard is left.
func (s *Server) listShards(m *wire.ListTopics, hosted []bool, shard uint64, after []byte, out *wire.TopicList, done func(*wire.TopicList, error)) {
	var batch []uint64
	sm := s.cfg.Map()
	shard, after = nextLive(sm, shard, after)
	for sh := shard; sh < uint64(sm.IDLimit()) && isHosted(hosted, sh) && len(batch) < listReadAhead; sh, _ = nextLive(sm, sh+1, nil) {
		batch = append(batch, sh)
	}
	if len(batch) == 0 {
		s.endList(out, shard, after, done)
		return
	}
	var mu sync.Mutex
	left := len(batch)
	errs := make([]error, len(batch))
	for i, sh := range batch {
		s.cfg.Replicas.ReadIndex(sh, func(err error) {
			mu.Lock()
			errs[i] = err
			left--
			last := left == 0
			mu.Unlock()
			if !last {
				return
			}
			// Off the raft worker: a page may be thousands of topics.
			s.cfg.Spawn(func() {
				after := after
				for i, sh := range batch {
					if errs[i] != nil {
						if len(out.Topics) == 0 && len(out.Positions) == 0 {
							done(nil, refuse(ErrUnreadable, fmt.Sprintf("list shard %d: %v", sh, errs[i]), errs[i]))
							return
						}
						s.endList(out, sh, after, done)
						return
					}
					if full, err := s.listShard(m, sh, after, out); err != nil {
						done(nil, err)
						return
					} else if full {
						last := out.Topics[len(out.Topics)-1].Topic
						s.endList(out, sh, last, done)
						return
					}
					after = nil
				}
				s.listShards(m, hosted, batch[len(batch)-1]+1, nil, out, done)
			})
		})
	}
}

// listShard appends the topics of shard above after to out, until the
// page is full (then it reports true). The page's bytes are views of the
// state's strings (which never change), and each owner's address is
// looked up once a page: a page is thousands of topics.
func (s *Server) listShard(m *wire.ListTopics, shard uint64, after []byte, out *wire.TopicList) (bool, error) {
	full := false
	from := after
	if bytes.Compare(m.Prefix, after) > 0 {
		from = m.Prefix
	}
	var owner string
	var owned, addr []byte
	seen := false // owner, owned and addr hold an owner's
	err := s.cfg.Replicas.Read(shard, func(l *Log, topicsFrom func([]byte) iter.Seq[meta.Assignment]) {
		out.Positions = append(out.Positions, wire.ShardPosition{Shard: shard, Index: l.applied})
		for a := range topicsFrom(from) {
			t := bytesOf(a.Topic)
			if len(after) > 0 && bytes.Compare(t, after) <= 0 {
				continue
			}
			if !bytes.HasPrefix(t, m.Prefix) {
				return // sorted: every later topic is past the prefix too
			}
			if !seen || a.Owner != owner {
				owner, owned, addr, seen = a.Owner, bytesOf(a.Owner), []byte(s.cfg.OwnerAddr(a.Owner)), true
			}
			out.Topics = append(out.Topics, wire.Assignment{Topic: t, Owner: owned, OwnerAddr: addr,
				Epoch: a.Epoch, Partitions: a.Partitions, Shard: shard})
			if len(out.Topics) == int(m.Limit) {
				full = true
				return
			}
		}
	})
	return full, err
}

// nextLive returns the first shard of sm at or after shard in id order
// that is live (sm's IDLimit when none is), with after kept only if it is
// shard itself: a listing skips the shards that split, whose topics its
// children hold. The client takes only the shards it asked for next, in
// its own order, and sees a shard it asked for passed over here (no
// position for it): that is how a listing crosses a split (client
// listRange).
func nextLive(sm *router.ShardMap, shard uint64, after []byte) (uint64, []byte) {
	start := shard
	for shard < uint64(sm.IDLimit()) && !sm.Live(uint32(shard)) {
		shard++
	}
	if shard != start {
		after = nil
	}
	return shard, after
}

// bytesOf is s's bytes, not copied: they must not be written.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// endList answers a listing whose next page starts at (shard, after).
func (s *Server) endList(out *wire.TopicList, shard uint64, after []byte, done func(*wire.TopicList, error)) {
	out.NextShard, out.NextAfter = shard, after
	if shard >= uint64(s.cfg.Map().IDLimit()) {
		out.NextShard, out.NextAfter, out.Done = 0, nil, true
	}
	done(out, nil)
}
