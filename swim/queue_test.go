package swim

import (
	"bytes"
	"testing"

	"github.com/shoalmq/shoal/wire"
)

func encAlive(id string, inc uint64, pad int) []byte {
	return wire.AppendSwimEvent(nil, &wire.SwimEvent{Kind: wire.SwimAlive, Node: []byte(id), Incarnation: inc,
		SwimAddr: []byte("a"), Meta: bytes.Repeat([]byte{'m'}, pad)})
}

func datagramEvents(t *testing.T, b []byte) []wire.SwimEvent {
	t.Helper()
	d := wire.SwimDatagram{Events: make([]wire.SwimEvent, 0, wire.MaxEventsPerDatagram)}
	if err := wire.DecodeSwimDatagram(b, &d); err != nil {
		t.Fatal(err)
	}
	return d.Events
}

func newDatagram() ([]byte, int) {
	b, _ := wire.AppendSwimHeader(nil, &wire.SwimHeader{ClusterID: 1, Sender: []byte("s")})
	b = wire.AppendSwimMessage(b, &wire.SwimMessage{Kind: wire.SwimAck, Seq: 1})
	return wire.BeginSwimEvents(b)
}

func TestQueueReplacesOlderAboutSameSubject(t *testing.T) {
	q := newBroadcastQueue(100, 1<<20)
	q.push(qkey{kind: qMember, id: "a"}, encAlive("a", 1, 0))
	q.push(qkey{kind: qMember, id: "b"}, encAlive("b", 1, 0))
	q.push(qkey{kind: qMember, id: "a"}, encAlive("a", 2, 0))
	q.push(qkey{kind: qShard, num: 1}, encAlive("s", 1, 0))
	if q.Len() != 3 {
		t.Fatalf("len %d, want 3", q.Len())
	}
	b, off := newDatagram()
	b = q.fill(b, off, len(b)+1000, 10)
	evs := datagramEvents(t, b)
	if len(evs) != 3 {
		t.Fatalf("%d events", len(evs))
	}
	for _, e := range evs {
		if string(e.Node) == "a" && e.Incarnation != 2 {
			t.Fatalf("the older event about a was sent")
		}
	}
}

func TestQueueTransmitLimitAndLeastSentFirst(t *testing.T) {
	q := newBroadcastQueue(100, 1<<20)
	q.push(qkey{kind: qMember, id: "old"}, encAlive("old", 1, 0))
	for range 2 {
		b, off := newDatagram()
		q.fill(b, off, len(b)+1000, 3)
	}
	q.push(qkey{kind: qMember, id: "new"}, encAlive("new", 1, 0))
	// Room for one event: the never-sent one goes first.
	b, off := newDatagram()
	one := len(encAlive("new", 1, 0))
	b = q.fill(b, off, len(b)+one, 3)
	if evs := datagramEvents(t, b); len(evs) != 1 || string(evs[0].Node) != "new" {
		t.Fatalf("sent %+v, want the least-sent", evs)
	}
	// "old" has been sent twice; its third send is its last.
	b, off = newDatagram()
	b = q.fill(b, off, len(b)+1000, 3)
	if len(datagramEvents(t, b)) != 2 {
		t.Fatal("want both events")
	}
	if _, ok := q.byKey[qkey{kind: qMember, id: "old"}]; ok {
		t.Fatal("event sent 3 times is still queued with limit 3")
	}
	if q.Len() != 1 {
		t.Fatalf("len %d", q.Len())
	}
}

func TestQueueBoundedInEntriesAndBytes(t *testing.T) {
	q := newBroadcastQueue(4, 1<<20)
	for i := range 10 {
		q.push(qkey{kind: qShard, num: uint64(i)}, encAlive("x", uint64(i), 0))
	}
	if q.Len() != 4 || q.dropped != 6 {
		t.Fatalf("len %d dropped %d", q.Len(), q.dropped)
	}
	// The most-sent go first when full.
	b, off := newDatagram()
	q.fill(b, off, len(b)+1000, 10)
	q.push(qkey{kind: qShard, num: 99}, encAlive("fresh", 1, 0))
	if _, ok := q.byKey[qkey{kind: qShard, num: 99}]; !ok || q.Len() != 4 {
		t.Fatal("fresh event not kept")
	}
	qb := newBroadcastQueue(1000, 500)
	for i := range 10 {
		qb.push(qkey{kind: qShard, num: uint64(i)}, encAlive("x", 1, 90))
	}
	if qb.bytes > 500 || qb.Len() == 0 {
		t.Fatalf("bytes %d len %d", qb.bytes, qb.Len())
	}
}

func TestPiggybackStaysWithinDatagramBudget(t *testing.T) {
	n := testNode(t, "me")
	for i := range 200 {
		n.queue.push(qkey{kind: qShard, num: uint64(i)}, encAlive("member-with-a-longish-name", uint64(i), 40))
	}
	n.sendMsg("x:1", []byte("x"), &wire.SwimMessage{Kind: wire.SwimPing, Seq: 1, Target: []byte("x")}, nil)
	p := n.Ready().Packets[0]
	if len(p.Data) > n.cfg.DatagramBudget {
		t.Fatalf("datagram %d bytes over budget %d", len(p.Data), n.cfg.DatagramBudget)
	}
	evs := datagramEvents(t, p.Data)
	if len(evs) < 10 || len(p.Data)+len(encAlive("member-with-a-longish-name", 1, 40)) <= n.cfg.DatagramBudget {
		t.Fatalf("%d events in %d bytes: budget not used", len(evs), len(p.Data))
	}
}
