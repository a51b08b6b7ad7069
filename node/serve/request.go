package serve

import (
	"fmt"

	"github.com/shoalmq/shoal/wire"
)

// Request is a metadata request (Assign, Revoke, UpdatePartition,
// Lookup) decoded once, where it arrives: its kind, its payload as a
// forward carries it, and its fields. Its byte fields alias the payload
// it was decoded from.
type Request struct {
	Kind         wire.Kind
	Payload      []byte
	Topic        []byte
	Owner        []byte       // Assign: the owner asked for, empty for any
	Partitions   uint32       // Assign, UpdatePartition
	Session      wire.Session // Assign, Revoke, UpdatePartition
	Linearizable bool         // Lookup
}

// DecodeRequest takes).
func IsMetaRequest(kind wire.Kind) bool {
	switch kind {
	case wire.KindAssign, wire.KindRevoke, wire.KindUpdatePartition, wire.KindLookup:
		return true
	}
	return false
}

// DecodeRequest decodes a metadata request of kind; any other kind is an
// error.
func DecodeRequest(kind wire.Kind, payload []byte) (Request, error) {
	r := Request{Kind: kind, Payload: payload}
	switch kind {
	case wire.KindAssign:
		var m wire.Assign
		if err := wire.DecodeAssign(payload, &m); err != nil {
			return r, err
		}
		r.Topic, r.Owner, r.Partitions, r.Session = m.Topic, m.Owner, m.Partitions, m.Session
	case wire.KindRevoke:
		var m wire.Revoke
		if err := wire.DecodeRevoke(payload, &m); err != nil {
			return r, err
		}
		r.Topic, r.Session = m.Topic, m.Session
	case wire.KindUpdatePartition:
		var m wire.UpdatePartition
		if err := wire.DecodeUpdatePartition(payload, &m); err != nil {
			return r, err
		}
		r.Topic, r.Partitions, r.Session = m.Topic, m.Partitions, m.Session
	case wire.KindLookup:
		var m wire.Lookup
		if err := wire.DecodeLookup(payload, &m); err != nil {
			return r, err
		}
		r.Topic, r.Linearizable = m.Topic, m.Linearizable
	default:
		return r, fmt.Errorf("unexpected %v request", kind)
	}
	return r, nil
}

// Write reports whether r is a write (it carries a session).
func (r *Request) Write() bool { return r.Kind != wire.KindLookup }

// SetSession gives the write r session s, in its fields and its payload.
func (r *Request) SetSession(s wire.Session) {
	r.Session = s
	switch r.Kind {
	case wire.KindAssign:
		r.Payload = wire.AppendAssign(nil, &wire.Assign{Topic: r.Topic, Owner: r.Owner, Partitions: r.Partitions, Session: s})
	case wire.KindRevoke:
		r.Payload = wire.AppendRevoke(nil, &wire.Revoke{Topic: r.Topic, Session: s})
	case wire.KindUpdatePartition:
		r.Payload = wire.AppendUpdatePartition(nil, &wire.UpdatePartition{Topic: r.Topic, Partitions: r.Partitions, Session: s})
	}
}
