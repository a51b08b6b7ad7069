// Package clienttest runs fake Shoal nodes for tests of clients: real TCP
// listeners on 127.0.0.1 speaking the real wire protocol (handshake,
// pipelined requests answered in any order), backed by one in-memory table
// of topics shared by the nodes of a Cluster, with faults that a test
// injects per node and request kind: an Error answer, a dropped connection,
// a stalled request.
//
// A fake node is not a Shoal node: there is no raft, no gossip and no
// forwarding. Every node answers metadata requests from the shared table at
// once, and the owner of a topic serves its data requests at the current
// epoch only, answering NotLeaderForTopic otherwise, as a real owner does;
// a Produce with a session is appended once, a retry of it answered with
// the first answer, as a real owner does.
package clienttest

import (
	"bufio"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/wire"
)

// Cluster is the shared state of a set of fake nodes.
type Cluster struct {
	// ClusterID is checked against every client Hello.
	ClusterID uint64
	// Secret, when set, makes every node require and give HelloAuth.
	Secret []byte
	// Tokens, when set, makes every node require one of them in the
	// client's Hello (and no HelloAuth), as a node with client tokens
	// does: any other is answered Unauthorized and the connection closed.
	Tokens []string
	// TLS, when set, makes every node's listener TLS with it.
	TLS *tls.Config
	// Shards is the shard count used for Assignment.Shard. Default 64.
	Shards uint32
	// Leaders, when set, makes every node answer ShardLeaders with a table
	// in which shard s is led by the s mod n-th node started; without it
	// ShardLeaders is answered BadRequest, as by a node that predates it.
	Leaders bool
	// OmitHints leaves the owner's id and address out of
	// NotLeaderForTopic answers (the epoch is always there), so a client
	// must look the topic up again.
	OmitHints bool

	mu     sync.Mutex
	nodes  []*Node
	topics map[string]*topicState
}

type topicState struct {
	owner      string
	epoch      uint64
	partitions uint32
	records    [][]byte
	epochs     []uint64 // the epoch each record was written at
	// produced: the answers of the produces with a session, by ID and Seq.
	produced map[[2]uint64]wire.ProduceAck
}

// Fault is what a node does with one request instead of answering it.
type Fault struct {
	// Err, if set, is answered instead of the request's answer.
	Err *wire.ErrorResponse
	// Drop closes the connection without answering.
	Drop bool
	// Lose handles the request, then closes the connection without
	// answering: the answer was lost.
	Lose bool
	// Stall never answers (until the node closes).
	Stall bool
	// Delay waits before handling the request (or applying the fault).
	Delay time.Duration
	// Stale answers a Lookup with this assignment instead of the table's,
	// as a node whose view lags behind would.
	Stale *wire.Assignment
}

// Node is one fake node listening on 127.0.0.1.
type Node struct {
	ID      string
	cluster *Cluster
	ln      net.Listener
	addr    string
	done    chan struct{}
	wg      sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]*session
	faults map[wire.Kind][]Fault
	closed bool

	counts      [64]atomic.Int64 // requests received per kind
	linear      atomic.Int64     // linearizable lookups answered
	accepted    atomic.Int64
	inFlight    atomic.Int64
	maxInFlight atomic.Int64
}

// Start starts a node with the given id on a fresh loopback port.
func (c *Cluster) Start(id string) (*Node, error) {
	return c.StartAt(id, "127.0.0.1:0")
}

// StartAt starts a node listening on addr (a loopback address; port 0
// picks one). A node with the same id replaces the old one in listings.
func (c *Cluster) StartAt(id, addr string) (*Node, error) {
	if id == "" || len(id) > wire.MaxNodeIDLen {
		return nil, fmt.Errorf("clienttest: bad node id %q", id)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("clienttest: listen %s: %w", addr, err)
	}
	if c.TLS != nil {
		ln = tls.NewListener(ln, c.TLS)
	}
	n := &Node{
		ID: id, cluster: c, ln: ln, addr: ln.Addr().String(), done: make(chan struct{}),
		conns: make(map[net.Conn]*session), faults: make(map[wire.Kind][]Fault),
	}
	c.mu.Lock()
	if c.topics == nil {
		c.topics = make(map[string]*topicState)
	}
	c.nodes = slices.DeleteFunc(c.nodes, func(o *Node) bool { return o.ID == id })
	c.nodes = append(c.nodes, n)
	slices.SortFunc(c.nodes, func(a, b *Node) int {
		if a.ID < b.ID {
			return -1
		}
		if a.ID > b.ID {
			return 1
		}
		return 0
	})
	c.mu.Unlock()
	n.wg.Add(1)
	go n.accept()
	return n, nil
}

// Addr is the node's client address.
func (n *Node) Addr() string { return n.addr }

// Requests returns how many requests of kind the node has received.
func (n *Node) Requests(kind wire.Kind) int {
	if int(kind) >= len(n.counts) {
		return 0
	}
	return int(n.counts[kind].Load())
}

// LinearLookups returns how many linearizable lookups the node answered
// (Requests(wire.KindLookup) counts them with the plain ones).
func (n *Node) LinearLookups() int { return int(n.linear.Load()) }

// MaxInFlight returns the most requests the node has had in progress at
// once, over all its connections.
func (n *Node) MaxInFlight() int { return int(n.maxInFlight.Load()) }

// Accepted returns how many connections the node has accepted.
func (n *Node) Accepted() int { return int(n.accepted.Load()) }

// Inject queues faults for the next requests of kind, one per request.
func (n *Node) Inject(kind wire.Kind, faults ...Fault) {
	n.mu.Lock()
	n.faults[kind] = append(n.faults[kind], faults...)
	n.mu.Unlock()
}

// DropConns closes every open connection, as a crashing process would,
// without closing the listener.
func (n *Node) DropConns() {
	n.mu.Lock()
	for c := range n.conns {
		_ = c.Close()
	}
	n.mu.Unlock()
}

// Keepalive sends a Keepalive frame on every open connection, as a node
// may on an idle one.
func (n *Node) Keepalive() {
	n.mu.Lock()
	sessions := make([]*session, 0, len(n.conns))
	for _, s := range n.conns {
		sessions = append(sessions, s)
	}
	n.mu.Unlock()
	for _, s := range sessions {
		_ = s.send(wire.KindKeepalive, 0, nil)
	}
}

// Close stops the node: the listener and every connection are closed and
// its goroutines have exited when Close returns. The address then refuses
// connections.
func (n *Node) Close() {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.closed = true
	close(n.done)
	_ = n.ln.Close()
	for c := range n.conns {
		_ = c.Close()
	}
	n.mu.Unlock()
	n.wg.Wait()
}

// Close closes every node of the cluster.
func (c *Cluster) Close() {
	c.mu.Lock()
	nodes := slices.Clone(c.nodes)
	c.mu.Unlock()
	for _, n := range nodes {
		n.Close()
	}
}

// SetOwner moves topic to owner (creating it with one partition if
// needed) at the next epoch, without telling any client, and returns the
// epoch.
func (c *Cluster) SetOwner(topic, owner string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.topic(topic)
	t.owner = owner
	t.epoch++
	return t.epoch
}

// Records returns a copy of topic's records.
func (c *Cluster) Records(topic string) [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.topics[topic]
	if t == nil {
		return nil
	}
	out := make([][]byte, len(t.records))
	for i, r := range t.records {
		out[i] = slices.Clone(r)
	}
	return out
}

// topic returns topic's state, creating it. Caller holds c.mu.
func (c *Cluster) topic(name string) *topicState {
	if c.topics == nil {
		c.topics = make(map[string]*topicState)
	}
	t := c.topics[name]
	if t == nil {
		t = &topicState{partitions: 1}
		c.topics[name] = t
	}
	return t
}

// nodeLocked finds a node by id. Caller holds c.mu.
func (c *Cluster) nodeLocked(id string) *Node {
	for _, n := range c.nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}

func (n *Node) accept() {
	defer n.wg.Done()
	for {
		nc, err := n.ln.Accept()
		if err != nil {
			return
		}
		n.mu.Lock()
		if n.closed {
			n.mu.Unlock()
			_ = nc.Close()
			return
		}
		s := &session{n: n, nc: nc}
		n.conns[nc] = s
		n.wg.Add(1)
		n.mu.Unlock()
		n.accepted.Add(1)
		go n.serve(s)
	}
}

// session is one accepted connection.
type session struct {
	n   *Node
	nc  net.Conn
	wmu sync.Mutex
	wg  sync.WaitGroup
}

func (n *Node) serve(s *session) {
	defer n.wg.Done()
	nc := s.nc
	defer func() {
		_ = nc.Close()
		s.wg.Wait()
		n.mu.Lock()
		delete(n.conns, nc)
		n.mu.Unlock()
	}()
	br := bufio.NewReader(nc)
	if err := s.handshake(br); err != nil {
		return
	}
	for {
		h, payload, err := readFrame(br)
		if err != nil {
			return
		}
		if int(h.Kind) < len(n.counts) {
			n.counts[h.Kind].Add(1)
		}
		if !h.Kind.IsClientRequest() {
			s.answerError(h.RequestID, wire.NewErrorResponse(wire.CodeBadRequest, "not a client request: "+h.Kind.String()))
			continue
		}
		s.wg.Add(1)
		go s.handle(h, payload)
	}
}

func readFrame(r io.Reader) (wire.Header, []byte, error) {
	var hdr [wire.HeaderSize]byte
	var h wire.Header
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return h, nil, err
	}
	if err := wire.DecodeHeader(hdr[:], &h); err != nil {
		return h, nil, err
	}
	payload := make([]byte, h.Length)
	if _, err := io.ReadFull(r, payload); err != nil {
		return h, nil, err
	}
	if h.Flags&wire.FlagCompressed != 0 {
		plain, _, err := wire.FramePayload(&h, payload, nil)
		if err != nil {
			return h, nil, err
		}
		payload = plain
	}
	return h, payload, nil
}

func (s *session) handshake(br *bufio.Reader) error {
	_ = s.nc.SetDeadline(time.Now().Add(5 * time.Second))
	defer func() { _ = s.nc.SetDeadline(time.Time{}) }()
	h, payload, err := readFrame(br)
	if err != nil {
		return err
	}
	var theirs wire.Hello
	if h.Kind != wire.KindHello {
		return errors.New("clienttest: first frame is not Hello")
	}
	if err := wire.DecodeHello(payload, &theirs); err != nil {
		return err
	}
	c := s.n.cluster
	if theirs.ClusterID != c.ClusterID {
		s.answerError(0, wire.NewErrorResponse(wire.CodeUnauthorized, "another cluster"))
		return errors.New("clienttest: cluster id mismatch")
	}
	if len(c.Tokens) > 0 && !slices.Contains(c.Tokens, string(theirs.Token)) {
		s.answerError(0, wire.NewErrorResponse(wire.CodeUnauthorized, "unknown or missing client token"))
		return errors.New("clienttest: bad token")
	}
	ours := wire.Hello{Version: wire.ProtocolVersion, Role: wire.RolePeer, ClusterID: c.ClusterID,
		Generation: 1, NodeID: []byte(s.n.ID)}
	if _, err := rand.Read(ours.Nonce[:]); err != nil {
		return err
	}
	ourPayload := wire.AppendHello(nil, &ours)
	if err := s.send(wire.KindHello, 0, ourPayload); err != nil {
		return err
	}
	if len(c.Secret) == 0 || len(c.Tokens) > 0 {
		return nil
	}
	h, authPayload, err := readFrame(br)
	if err != nil {
		return err
	}
	var auth wire.HelloAuth
	if h.Kind != wire.KindHelloAuth || wire.DecodeHelloAuth(authPayload, &auth) != nil ||
		!hmac.Equal(auth.Tag[:], tag(c.Secret, ours.Nonce[:], payload)) {
		s.answerError(0, wire.NewErrorResponse(wire.CodeUnauthorized, "wrong proof of the shared secret"))
		return errors.New("clienttest: bad HelloAuth")
	}
	var mine wire.HelloAuth
	copy(mine.Tag[:], tag(c.Secret, theirs.Nonce[:], ourPayload))
	return s.send(wire.KindHelloAuth, 0, wire.AppendHelloAuth(nil, &mine))
}

func tag(secret, nonce, hello []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write(nonce)
	m.Write(hello)
	return m.Sum(nil)
}

func (s *session) send(kind wire.Kind, id uint64, payload []byte) error {
	buf, start := wire.BeginFrame(make([]byte, 0, wire.HeaderSize+len(payload)), kind, id)
	buf = append(buf, payload...)
	buf, err := wire.EndFrame(buf, start)
	if err != nil {
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_, err = s.nc.Write(buf)
	return err
}

func (s *session) answerError(id uint64, e *wire.ErrorResponse) {
	_ = s.send(wire.KindError, id, wire.AppendErrorResponse(nil, e))
}

func (n *Node) nextFault(kind wire.Kind) (Fault, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	q := n.faults[kind]
	if len(q) == 0 {
		return Fault{}, false
	}
	f := q[0]
	n.faults[kind] = q[1:]
	return f, true
}

func (s *session) handle(h wire.Header, payload []byte) {
	defer s.wg.Done()
	cur := s.n.inFlight.Add(1)
	for m := s.n.maxInFlight.Load(); cur > m && !s.n.maxInFlight.CompareAndSwap(m, cur); m = s.n.maxInFlight.Load() {
	}
	// A request stops counting as in flight before its answer is sent, so
	// a client's next request, sent on receipt, is not counted twice.
	done := false
	finish := func() {
		if !done {
			done = true
			s.n.inFlight.Add(-1)
		}
	}
	defer finish()
	lost := false
	if f, ok := s.n.nextFault(h.Kind); ok {
		lost = f.Lose
		if f.Delay > 0 {
			select {
			case <-time.After(f.Delay):
			case <-s.n.done:
				return
			}
		}
		switch {
		case f.Stall:
			<-s.n.done
			return
		case f.Drop:
			finish()
			_ = s.nc.Close()
			return
		case f.Err != nil:
			finish()
			s.answerError(h.RequestID, f.Err)
			return
		case f.Stale != nil:
			finish()
			_ = s.send(wire.KindAssignment, h.RequestID, wire.AppendAssignment(nil, f.Stale))
			return
		}
	}
	kind, answer, err := s.n.answer(h.Kind, payload)
	finish()
	if lost {
		_ = s.nc.Close()
		return
	}
	if err != nil {
		s.answerError(h.RequestID, wire.ErrorResponseOf(err))
		return
	}
	_ = s.send(kind, h.RequestID, answer)
}

func badRequest(err error) error {
	return wire.NewErrorResponse(wire.CodeBadRequest, err.Error())
}

// answer computes the answer to one request from the shared table.
func (n *Node) answer(kind wire.Kind, payload []byte) (wire.Kind, []byte, error) {
	c := n.cluster
	c.mu.Lock()
	defer c.mu.Unlock()
	switch kind {
	case wire.KindAssign:
		var m wire.Assign
		if err := wire.DecodeAssign(payload, &m); err != nil {
			return 0, nil, badRequest(err)
		}
		owner := string(m.Owner)
		if owner == "" {
			owner = c.chooseLocked(m.Topic)
		}
		if c.nodeLocked(owner) == nil {
			return 0, nil, wire.NewErrorResponse(wire.CodeBadRequest, "no node "+owner)
		}
		t := c.topic(string(m.Topic))
		if t.owner != owner {
			t.owner = owner
			t.epoch++
		}
		if m.Partitions != 0 {
			t.partitions = m.Partitions
		}
		return wire.KindAssignment, c.assignmentLocked(m.Topic, t), nil
	case wire.KindLookup:
		var m wire.Lookup
		if err := wire.DecodeLookup(payload, &m); err != nil {
			return 0, nil, badRequest(err)
		}
		if m.Linearizable {
			n.linear.Add(1)
		}
		t := c.topics[string(m.Topic)]
		if t == nil || t.owner == "" {
			return 0, nil, wire.NewErrorResponse(wire.CodeNotFound, "topic "+string(m.Topic)+" is not assigned")
		}
		return wire.KindAssignment, c.assignmentLocked(m.Topic, t), nil
	case wire.KindUpdatePartition:
		var m wire.UpdatePartition
		if err := wire.DecodeUpdatePartition(payload, &m); err != nil {
			return 0, nil, badRequest(err)
		}
		t := c.topics[string(m.Topic)]
		if t == nil || t.owner == "" {
			return 0, nil, wire.NewErrorResponse(wire.CodeNotFound, "topic "+string(m.Topic)+" is not assigned")
		}
		t.partitions = m.Partitions
		return wire.KindAssignment, c.assignmentLocked(m.Topic, t), nil
	case wire.KindRevoke:
		var m wire.Revoke
		if err := wire.DecodeRevoke(payload, &m); err != nil {
			return 0, nil, badRequest(err)
		}
		t := c.topics[string(m.Topic)]
		if t == nil || t.owner == "" {
			return 0, nil, wire.NewErrorResponse(wire.CodeNotFound, "topic "+string(m.Topic)+" is not assigned")
		}
		t.owner = ""
		t.epoch++
		return wire.KindRevoked, wire.AppendRevoked(nil, &wire.Revoked{Topic: m.Topic, Epoch: t.epoch}), nil
	case wire.KindProduce:
		var m wire.Produce
		if err := wire.DecodeProduce(payload, &m); err != nil {
			return 0, nil, badRequest(err)
		}
		t, err := n.ownLocked(m.Topic, m.Epoch)
		if err != nil {
			return 0, nil, err
		}
		key := [2]uint64{m.Session.ID, m.Session.Seq}
		if a, ok := t.produced[key]; ok && !m.Session.IsZero() {
			return wire.KindProduceAck, wire.AppendProduceAck(nil, &a), nil
		}
		a := wire.ProduceAck{Topic: m.Topic, Epoch: t.epoch, Offset: uint64(len(t.records))}
		for _, r := range m.Records {
			t.records = append(t.records, slices.Clone(r))
			t.epochs = append(t.epochs, t.epoch)
		}
		if !m.Session.IsZero() {
			if t.produced == nil {
				t.produced = make(map[[2]uint64]wire.ProduceAck)
			}
			a.Topic = slices.Clone(m.Topic)
			t.produced[key] = a
		}
		return wire.KindProduceAck, wire.AppendProduceAck(nil, &a), nil
	case wire.KindFetch:
		var m wire.Fetch
		if err := wire.DecodeFetch(payload, &m); err != nil {
			return 0, nil, badRequest(err)
		}
		t, err := n.ownLocked(m.Topic, m.Epoch)
		if err != nil {
			return 0, nil, err
		}
		limit := int(m.MaxBytes)
		if limit == 0 {
			limit = 1 << 20
		}
		res := wire.FetchResult{Topic: m.Topic, Epoch: t.epoch, Next: m.From, HighWatermark: uint64(len(t.records))}
		size := 0
		for off := m.From; off < uint64(len(t.records)) && len(res.Records) < wire.MaxRecordsPerProduce; off++ {
			v := t.records[off]
			if len(res.Records) > 0 && size+len(v) > limit {
				break
			}
			size += len(v)
			res.Records = append(res.Records, wire.Record{Offset: off, Epoch: t.epochs[off], Value: v})
			res.Next = off + 1
		}
		return wire.KindFetchResult, wire.AppendFetchResult(nil, &res), nil
	case wire.KindMembers:
		if err := wire.DecodeEmpty(payload); err != nil {
			return 0, nil, badRequest(err)
		}
		var m wire.MemberList
		for _, o := range c.nodes {
			state := wire.MemberAlive
			if o.isClosed() {
				state = wire.MemberDead
			}
			m.Members = append(m.Members, wire.Member{ID: []byte(o.ID), Generation: 1, Incarnation: 0, State: state,
				Rack: []byte("r1"), SwimAddr: []byte(o.addr), ClientAddr: []byte(o.addr), PeerAddr: []byte(o.addr)})
		}
		return wire.KindMemberList, wire.AppendMemberList(nil, &m), nil
	case wire.KindShards:
		if err := wire.DecodeEmpty(payload); err != nil {
			return 0, nil, badRequest(err)
		}
		var m wire.ShardList
		var ids [][]byte
		for _, o := range c.nodes {
			ids = append(ids, []byte(o.ID))
		}
		for s := range uint64(2) {
			info := wire.ShardInfo{Shard: s, Replicas: ids, Term: 1}
			if len(ids) > 0 {
				info.Leader = ids[int(s)%len(ids)]
			}
			m.Shards = append(m.Shards, info)
		}
		return wire.KindShardList, wire.AppendShardList(nil, &m), nil
	case wire.KindShardLeaders:
		if !c.Leaders {
			break
		}
		shards := c.shards()
		m := wire.LeaderTable{Shards: uint64(shards), Base: uint64(shards), Leaders: make([]uint32, shards), Terms: make([]uint64, shards)}
		for _, o := range c.nodes {
			m.Nodes = append(m.Nodes, wire.LeaderNode{ID: []byte(o.ID), Addr: []byte(o.addr)})
		}
		for s := range m.Leaders {
			if len(c.nodes) > 0 {
				m.Leaders[s], m.Terms[s] = uint32(s%len(c.nodes)+1), 1
			}
		}
		return wire.KindLeaderTable, wire.AppendLeaderTableAnswer(nil, &m), nil
	case wire.KindStatus:
		if err := wire.DecodeEmpty(payload); err != nil {
			return 0, nil, badRequest(err)
		}
		m := wire.StatusInfo{Node: []byte(n.ID), Generation: 1, ShardsHosted: 2, Ready: true}
		for _, o := range c.nodes {
			if !o.isClosed() {
				m.MembersAlive++
			}
		}
		for _, t := range c.topics {
			if t.owner == n.ID {
				m.TopicsOwned++
			}
		}
		return wire.KindStatusInfo, wire.AppendStatusInfo(nil, &m), nil
	}
	return 0, nil, wire.NewErrorResponse(wire.CodeBadRequest, "unhandled "+kind.String())
}

func (n *Node) isClosed() bool {
	select {
	case <-n.done:
		return true
	default:
		return false
	}
}

// ownLocked returns the topic if n owns it at epoch, else the
// NotLeaderForTopic a real owner would answer. Caller holds c.mu.
func (n *Node) ownLocked(topic []byte, epoch uint64) (*topicState, error) {
	c := n.cluster
	t := c.topics[string(topic)]
	if t != nil && t.owner == n.ID && t.epoch == epoch {
		return t, nil
	}
	e := &wire.ErrorResponse{Code: wire.CodeNotLeaderForTopic, Message: n.ID + " does not own " + string(topic) + " at that epoch"}
	if t != nil {
		e.Epoch = t.epoch
		if o := c.nodeLocked(t.owner); o != nil && !c.OmitHints {
			e.NodeID, e.Addr = o.ID, o.addr
		}
	}
	return nil, e
}

// chooseLocked picks an owner among live nodes by rendezvous hash of the
// topic. Caller holds c.mu.
func (c *Cluster) chooseLocked(topic []byte) string {
	best, bestScore := "", uint32(0)
	for _, o := range c.nodes {
		if o.isClosed() {
			continue
		}
		score := router.ShardOf(append(slices.Clone(topic), o.ID...), 1<<31)
		if best == "" || score > bestScore {
			best, bestScore = o.ID, score
		}
	}
	return best
}

// shards is Shards or its default.
func (c *Cluster) shards() uint32 {
	if c.Shards == 0 {
		return 64
	}
	return c.Shards
}

func (c *Cluster) assignmentLocked(topic []byte, t *topicState) []byte {
	shards := c.shards()
	a := wire.Assignment{Topic: topic, Owner: []byte(t.owner), Epoch: t.epoch, Partitions: t.partitions,
		Shard: uint64(router.ShardOf(topic, shards))}
	if o := c.nodeLocked(t.owner); o != nil {
		a.OwnerAddr = []byte(o.addr)
	}
	return wire.AppendAssignment(nil, &a)
}
