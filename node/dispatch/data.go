package dispatch

import (
	"errors"
	"fmt"

	"github.com/shoalmq/shoal/node/ownership"
	"github.com/shoalmq/shoal/node/records"
	"github.com/shoalmq/shoal/node/serve"
	"github.com/shoalmq/shoal/node/watch"
	"github.com/shoalmq/shoal/wire"
)

// Produce answers a Produce through done.
func (d *Dispatcher) Produce(payload []byte, done serve.Done) {
	var m wire.Produce
	if err := wire.DecodeProduce(payload, &m); err != nil {
		done(serve.ErrAnswer(wire.CodeBadRequest, err.Error()))
		return
	}
	d.records.Produce(&m, func(ack wire.ProduceAck, err error) {
		if err != nil {
			done(d.recordsRefusal(err))
			return
		}
		done(serve.NewAnswer(wire.KindProduceAck, wire.AppendProduceAck(nil, &ack)))
	})
}

// fetch answers a Fetch.
func (d *Dispatcher) fetch(payload []byte) serve.Answer {
	var m wire.Fetch
	if err := wire.DecodeFetch(payload, &m); err != nil {
		return serve.ErrAnswer(wire.CodeBadRequest, err.Error())
	}
	res, err := d.records.Fetch(&m)
	if err != nil {
		return d.recordsRefusal(err)
	}
	return serve.NewAnswer(wire.KindFetchResult, wire.AppendFetchResult(nil, &res))
}

// recordsRefusal is the answer to a produce or a fetch the room refused.
func (d *Dispatcher) recordsRefusal(err error) serve.Answer {
	var ns *records.NotServedError
	switch {
	case errors.As(err, &ns):
		return d.notServed(ns.Topic, ns.Held, ns.Why)
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
func (d *Dispatcher) notServed(topic []byte, held uint64, why ownership.Refusal) serve.Answer {
	if why == ownership.NoLease {
		d.notServedNoLease.Add(1)
	}
	return d.notOwner(topic, held, why.String())
}

// notOwner answers NotLeaderForTopic with the newest epoch this node knows
// and, from its cache, the owner at that epoch.
func (d *Dispatcher) notOwner(topic []byte, held uint64, why string) serve.Answer {
	d.rejected.Add(1)
	e := &wire.ErrorResponse{Code: wire.CodeNotLeaderForTopic, Message: fmt.Sprintf("not serving %q at that epoch: %s", topic, why), Epoch: held}
	if r, ok := d.routes.Get(topic); ok && r.Epoch > held && r.Owner != d.self {
		e.Epoch, e.NodeID, e.Addr = r.Epoch, r.Owner, r.Addr
	}
	return serve.ErrorAnswer(e)
}

// answerRecordsPull answers a peer's RecordsPull.
func (d *Dispatcher) answerRecordsPull(c Conn, h wire.Header, payload []byte) {
	var m wire.RecordsPull
	if wire.DecodeRecordsPull(payload, &m) != nil {
		return
	}
	d.records.AnswerPull(c, h.RequestID, &m)
}

// takeRecordsChunk hands a RecordsChunk from node from to the pull that
// asked for it.
func (d *Dispatcher) takeRecordsChunk(from string, h wire.Header, frame []byte) {
	payload, _, err := wire.FramePayload(&h, frame[wire.HeaderSize:], nil)
	if err != nil {
		return
	}
	c := new(wire.RecordsChunk)
	if wire.DecodeRecordsChunk(append([]byte(nil), payload...), c) != nil {
		return
	}
	d.records.TakeChunk(from, h.RequestID, c)
}

// serveWatch answers a Watch through done.
func (d *Dispatcher) serveWatch(payload []byte, done serve.Done) {
	var m wire.Watch
	if err := wire.DecodeWatch(payload, &m); err != nil {
		done(serve.ErrAnswer(wire.CodeBadRequest, err.Error()))
		return
	}
	d.watch.Watch(&m, func(ev *wire.WatchEvents, err error) {
		if err != nil {
			done(watchRefusal(err))
			return
		}
		done(serve.NewAnswer(wire.KindWatchEvents, wire.AppendWatchEvents(nil, ev)))
	})
}

// serveListTopics answers a ListTopics through done.
func (d *Dispatcher) serveListTopics(payload []byte, done serve.Done) {
	var m wire.ListTopics
	if err := wire.DecodeListTopics(payload, &m); err != nil {
		done(serve.ErrAnswer(wire.CodeBadRequest, err.Error()))
		return
	}
	d.watch.List(&m, func(page *wire.TopicList, err error) {
		if err != nil {
			done(watchRefusal(err))
			return
		}
		done(serve.NewAnswer(wire.KindTopicList, wire.AppendTopicList(nil, page)))
	})
}

// watchRefusal is the answer to a watch or a listing the room refused.
func watchRefusal(err error) serve.Answer {
	switch {
	case errors.Is(err, watch.ErrBadRequest):
		return serve.ErrAnswer(wire.CodeBadRequest, err.Error())
	case errors.Is(err, watch.ErrFull), errors.Is(err, watch.ErrUnreadable):
		return serve.Unavailable(err.Error())
	}
	return serve.ErrAnswer(wire.CodeInternal, err.Error())
}
