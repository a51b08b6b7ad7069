package node

import (
	"fmt"

	"github.com/shoalmq/shoal/wire"
)

// metaRequest is a metadata request (Assign, Revoke, UpdatePartition,
// Lookup) decoded once, where it arrives: its kind, its payload as a
// forward carries it, and its fields. Its byte fields alias the payload
// it was decoded from.
type metaRequest struct {
	kind         wire.Kind
	payload      []byte
	topic        []byte
	owner        []byte       // Assign: the owner asked for, empty for any
	partitions   uint32       // Assign, UpdatePartition
	session      wire.Session // Assign, Revoke, UpdatePartition
	linearizable bool         // Lookup
}

// decodeMetaRequest decodes a metadata request of kind; any other kind
// is an error.
func decodeMetaRequest(kind wire.Kind, payload []byte) (metaRequest, error) {
	r := metaRequest{kind: kind, payload: payload}
	switch kind {
	case wire.KindAssign:
		var m wire.Assign
		if err := wire.DecodeAssign(payload, &m); err != nil {
			return r, err
		}
		r.topic, r.owner, r.partitions, r.session = m.Topic, m.Owner, m.Partitions, m.Session
	case wire.KindRevoke:
		var m wire.Revoke
		if err := wire.DecodeRevoke(payload, &m); err != nil {
			return r, err
		}
		r.topic, r.session = m.Topic, m.Session
	case wire.KindUpdatePartition:
		var m wire.UpdatePartition
		if err := wire.DecodeUpdatePartition(payload, &m); err != nil {
			return r, err
		}
		r.topic, r.partitions, r.session = m.Topic, m.Partitions, m.Session
	case wire.KindLookup:
		var m wire.Lookup
		if err := wire.DecodeLookup(payload, &m); err != nil {
			return r, err
		}
		r.topic, r.linearizable = m.Topic, m.Linearizable
	default:
		return r, fmt.Errorf("unexpected %v request", kind)
	}
	return r, nil
}

// write reports whether r is a write (it carries a session).
func (r *metaRequest) write() bool { return r.kind != wire.KindLookup }

// setSession gives the write r session s, in its fields and its payload.
func (r *metaRequest) setSession(s wire.Session) {
	r.session = s
	switch r.kind {
	case wire.KindAssign:
		r.payload = wire.AppendAssign(nil, &wire.Assign{Topic: r.topic, Owner: r.owner, Partitions: r.partitions, Session: s})
	case wire.KindRevoke:
		r.payload = wire.AppendRevoke(nil, &wire.Revoke{Topic: r.topic, Session: s})
	case wire.KindUpdatePartition:
		r.payload = wire.AppendUpdatePartition(nil, &wire.UpdatePartition{Topic: r.topic, Partitions: r.partitions, Session: s})
	}
}
