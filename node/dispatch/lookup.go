package dispatch

import (
	"sync"
	"time"

	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/node/serve"
	"github.com/shoalmq/shoal/wire"
)

// fastBufs holds the answer buffers of serveFast (about one per
// connection reading at a time).
var fastBufs = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// serveFast answers, where the request was read and without allocating, a
// client's plain Lookup that needs no wait: the topic is active in this
// node's own replica of its shard, or cached with a live owner. Anything
// else (not ready, compressed, linearizable, unknown here) takes the
// request path.
func (d *Dispatcher) serveFast(c Conn, h wire.Header, frame []byte, start time.Time) bool {
	if h.Kind != wire.KindLookup || h.Flags&wire.FlagCompressed != 0 || c.Role() == wire.RolePeer || !d.env.Ready() {
		return false
	}
	bp := fastBufs.Get().(*[]byte)
	f, ok := d.AppendLookup((*bp)[:0], h.RequestID, frame[wire.HeaderSize:])
	if ok {
		d.requests.Add(1)
		// Counted before the answer leaves: a client that reads the
		// metrics once answered finds its request there.
		d.lat.Request(h.Kind, serve.Answer{Kind: wire.KindAssignment}, d.env.Now().Sub(start))
		_ = c.Write(f) // copies
	}
	*bp = f[:0]
	fastBufs.Put(bp)
	return ok
}

// AppendLookup appends to dst the answer frame to a plain Lookup with
// payload, when this node can give it at once, without allocating: the
// topic is active in this node's own replica of its shard, or cached
// with a live owner.
func (d *Dispatcher) AppendLookup(dst []byte, reqID uint64, payload []byte) ([]byte, bool) {
	var m wire.Lookup
	if wire.DecodeLookup(payload, &m) != nil || m.Linearizable || !d.env.Born() {
		return dst, false
	}
	shard := uint64(d.leaders.Map().Of(m.Topic))
	var a meta.Assignment
	var found, split bool
	hosted, busy := false, false
	if d.env.AnswersLocally(shard) {
		hosted, busy = d.sm.TryHosted(shard, func(st *meta.State) {
			if split = st.Split(); !split {
				a, found = st.Get(m.Topic)
			}
		})
	}
	if busy || split {
		return dst, false // a shard being applied or loaded, or split: the request path answers
	}
	if hosted {
		if !found || a.State != meta.Active {
			return dst, false // NotFound, with its message: the request path
		}
	} else {
		r, ok := d.routes.Get(m.Topic)
		if !ok || !d.env.Members().Alive(r.Owner) {
			return dst, false
		}
		a = meta.Assignment{Owner: r.Owner, Epoch: r.Epoch, Partitions: r.Partitions}
	}
	ans := wire.Assignment{Topic: m.Topic, Owner: []byte(a.Owner), OwnerAddr: []byte(d.env.ClientAddr(a.Owner)), Epoch: a.Epoch, Partitions: a.Partitions, Shard: shard}
	f, start := wire.BeginFrame(dst, wire.KindAssignment, reqID)
	f = wire.AppendAssignment(f, &ans)
	f, err := wire.EndFrame(f, start)
	return f, err == nil
}
