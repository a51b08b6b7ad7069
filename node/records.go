package node

import (
	"errors"
	"fmt"
	"time"

	"github.com/shoalmq/shoal/node/ownership"
	"github.com/shoalmq/shoal/node/records"
	"github.com/shoalmq/shoal/node/serve"
	"github.com/shoalmq/shoal/swim"
	"github.com/shoalmq/shoal/wire"
)

// A topic's records on its owner, and their handoff to the next one, are
// the records room's (node/records): produces, fetches, offsets, the
// produce gates and the record pulls on both sides. Here the room is given
// the node's parts, the frames it serves are decoded and its answers put
// on the wire; the lease room tells it when an OpenTopic or a CloseTopic
// applies, and Leave when the node leaves.

// MaxOffsetEpoch is the highest epoch a topic may take records at
// (records.MaxOffsetEpoch).
const MaxOffsetEpoch = records.MaxOffsetEpoch

// ErrOffsetSpace is wrapped by the refusal of a produce at an epoch above
// MaxOffsetEpoch.
var ErrOffsetSpace = records.ErrOffsetSpace

// newRecords builds the node's records room.
func (n *Node) newRecords() (*records.Keeper, error) {
	return records.New(records.Config{
		Store:          n.store,
		Env:            recordsEnv{n},
		HandoffTimeout: n.cfg.HandoffTimeout,
		PullWait:       n.cfg.LeaseRenewInterval,
		MaxFetchBytes:  n.cfg.MaxFetchBytes,
		PullChunkBytes: n.cfg.testHooks.handoffChunkBytes,
		OnHandoff:      n.cfg.OnHandoff,
		AfterAppend:    n.cfg.testHooks.afterAppend,
		AnswerPull:     n.cfg.testHooks.answerPull,
		Logger:         n.log,
	})
}

// recordsEnv is what the records room touches of the node. It reads the
// node's network, context and view when called: they are set after New.
type recordsEnv struct{ n *Node }

func (e recordsEnv) Serve(topic []byte, epoch uint64) (uint64, ownership.Refusal) {
	t, r := e.n.lease.Serve(topic, epoch)
	return t.Epoch, r
}

func (e recordsEnv) Holding(topic string) (uint64, bool) {
	t, ok := e.n.lease.Holding([]byte(topic))
	return t.Epoch, ok
}

func (e recordsEnv) HoldingLocked(topic []byte, fn func(epoch uint64, held bool)) {
	e.n.lease.HoldingLocked(topic, func(t ownership.Topic, held bool) { fn(t.Epoch, held) })
}

func (e recordsEnv) PeerAlive(peer string) bool {
	m, ok := e.n.view.Load().byID[peer]
	return ok && m.State == swim.StateAlive
}

func (e recordsEnv) PeerDead(peer string) bool {
	v := e.n.view.Load()
	return v.dead[peer] && v.byID[peer].State != swim.StateLeft
}

func (e recordsEnv) Send(peer string, frame []byte) error        { return e.n.net.Send(peer, frame) }
func (e recordsEnv) Now() time.Time                              { return e.n.clock() }
func (e recordsEnv) After(d time.Duration, f func()) func() bool { return e.n.after(d, f) }
func (e recordsEnv) Spawn(f func()) bool                         { return e.n.spawn(f) }
func (e recordsEnv) Resume(f func())                             { e.n.resume(f) }
func (e recordsEnv) Stopped() bool                               { return e.n.ctx.Err() != nil }

// produce answers a Produce through done.
func (n *Node) produce(payload []byte, done serve.Done) {
	var m wire.Produce
	if err := wire.DecodeProduce(payload, &m); err != nil {
		done(serve.ErrAnswer(wire.CodeBadRequest, err.Error()))
		return
	}
	n.records.Produce(&m, func(ack wire.ProduceAck, err error) {
		if err != nil {
			done(n.recordsRefusal(err))
			return
		}
		done(serve.NewAnswer(wire.KindProduceAck, wire.AppendProduceAck(nil, &ack)))
	})
}

// fetch answers a Fetch.
func (n *Node) fetch(payload []byte) serve.Answer {
	var m wire.Fetch
	if err := wire.DecodeFetch(payload, &m); err != nil {
		return serve.ErrAnswer(wire.CodeBadRequest, err.Error())
	}
	res, err := n.records.Fetch(&m)
	if err != nil {
		return n.recordsRefusal(err)
	}
	return serve.NewAnswer(wire.KindFetchResult, wire.AppendFetchResult(nil, &res))
}

// recordsRefusal is the answer to a produce or a fetch the room refused.
func (n *Node) recordsRefusal(err error) serve.Answer {
	var ns *records.NotServedError
	switch {
	case errors.As(err, &ns):
		return n.notServed(ns.Topic, ns.Held, ns.Why)
	case errors.Is(err, records.ErrHandingOver):
		return serve.Unavailable(err.Error())
	case errors.Is(err, records.ErrSessionExpired):
		return serve.ErrAnswer(wire.CodeSessionExpired, err.Error())
	case errors.Is(err, records.ErrBadRequest):
		return serve.ErrAnswer(wire.CodeBadRequest, err.Error())
	}
	return serve.ErrAnswer(wire.CodeInternal, err.Error())
}

// notServed answers a data request this node may not serve.
func (n *Node) notServed(topic []byte, held uint64, why ownership.Refusal) serve.Answer {
	if why == ownership.NoLease {
		n.counters.notServedNoLease.Add(1)
	}
	return n.notOwner(topic, held, why.String())
}

// notOwner answers NotLeaderForTopic with the newest epoch this node knows
// and, from its cache, the owner at that epoch.
func (n *Node) notOwner(topic []byte, held uint64, why string) serve.Answer {
	n.counters.rejected.Add(1)
	e := &wire.ErrorResponse{Code: wire.CodeNotLeaderForTopic, Message: fmt.Sprintf("not serving %q at that epoch: %s", topic, why), Epoch: held}
	if r, ok := n.routes().Get(topic); ok && r.Epoch > held && r.Owner != n.cfg.ID {
		e.Epoch, e.NodeID, e.Addr = r.Epoch, r.Owner, r.Addr
	}
	return serve.ErrorAnswer(e)
}

// answerRecordsPull answers a peer's RecordsPull.
func (n *Node) answerRecordsPull(c Conn, h wire.Header, payload []byte) {
	var m wire.RecordsPull
	if wire.DecodeRecordsPull(payload, &m) != nil {
		return
	}
	n.records.AnswerPull(c, h.RequestID, &m)
}

// takeRecordsChunk hands a RecordsChunk from node from to the pull that
// asked for it.
func (n *Node) takeRecordsChunk(from string, h wire.Header, frame []byte) {
	payload, _, err := wire.FramePayload(&h, frame[wire.HeaderSize:], nil)
	if err != nil {
		return
	}
	c := new(wire.RecordsChunk)
	if wire.DecodeRecordsChunk(append([]byte(nil), payload...), c) != nil {
		return
	}
	n.records.TakeChunk(from, h.RequestID, c)
}
