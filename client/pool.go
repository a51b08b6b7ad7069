package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// pool keeps up to Config.ConnsPerServer connections to every node the
// client talks to: the seeds, and the owners that lookups name. A
// connection is dialled on first use and replaced when it breaks. The pool
// owns every connection's reader and writer goroutines and stops them all
// in close.
type pool struct {
	cfg *Config

	// closing is cancelled by close: dials in progress give up at once.
	closing context.Context
	cancel  context.CancelFunc
	readers sync.WaitGroup // every connection's reader and writer

	// lastFailedAt: when a dial to any address last failed (unix nanos).
	lastFailedAt atomic.Int64

	mu     sync.Mutex
	hosts  map[string]*host
	closed bool
}

// host is the connections to one address.
type host struct {
	next  atomic.Uint32
	slots []hostSlot
	// failedAt is when the last dial to the address failed (unix nanos;
	// 0 since one succeeded): see pool.recentlyFailed.
	failedAt atomic.Int64
}

// failedDialMemory is how long a failed dial marks its address: a data
// request whose cached route names it looks the topic up again before
// dialling (Client.toOwner), since a node that cannot be reached is the
// one whose topics move. A dead host's address may not refuse at once
// but time out, and every topic it owned would wait that long.
const failedDialMemory = 2 * time.Second

// recentlyFailed reports whether the last dial to addr failed within
// failedDialMemory.
func (p *pool) recentlyFailed(addr string) bool {
	if at := p.lastFailedAt.Load(); at == 0 || time.Since(time.Unix(0, at)) >= failedDialMemory {
		return false // no dial failed lately: no lock on the common path
	}
	p.mu.Lock()
	h := p.hosts[addr]
	p.mu.Unlock()
	if h == nil {
		return false
	}
	at := h.failedAt.Load()
	return at != 0 && time.Since(time.Unix(0, at)) < failedDialMemory
}

// hostSlot holds one connection. lock is a one-token channel rather than a
// mutex so that a caller waiting behind another's dial can give up when its
// context ends.
type hostSlot struct {
	lock chan struct{}
	c    *conn // under lock
}

func newPool(cfg *Config) *pool {
	ctx, cancel := context.WithCancel(context.Background())
	return &pool{cfg: cfg, closing: ctx, cancel: cancel, hosts: make(map[string]*host)}
}

func (p *pool) host(addr string) (*host, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	h := p.hosts[addr]
	if h == nil {
		h = &host{slots: make([]hostSlot, p.cfg.ConnsPerServer)}
		for i := range h.slots {
			h.slots[i].lock = make(chan struct{}, 1)
		}
		p.hosts[addr] = h
	}
	return h, nil
}

// get returns a live connection to addr, dialling one if needed.
func (p *pool) get(ctx context.Context, addr string) (*conn, error) {
	h, err := p.host(addr)
	if err != nil {
		return nil, err
	}
	s := &h.slots[int(h.next.Add(1))%len(h.slots)]
	select {
	case s.lock <- struct{}{}:
	case <-ctx.Done():
		return nil, ctxErr(ctx)
	}
	defer func() { <-s.lock }()
	if s.c != nil && s.c.alive() {
		return s.c, nil
	}
	s.c = nil
	c, err := p.dial(ctx, addr)
	if err != nil {
		if errors.Is(err, ErrUnreachable) {
			now := time.Now().UnixNano()
			h.failedAt.Store(now)
			p.lastFailedAt.Store(now)
		}
		return nil, err
	}
	h.failedAt.Store(0)
	s.c = c
	return c, nil
}

// dial connects to addr within DialTimeout, the caller's ctx and the pool's
// life, and starts the connection's reader.
func (p *pool) dial(ctx context.Context, addr string) (*conn, error) {
	dctx, cancel := context.WithTimeoutCause(ctx, p.cfg.DialTimeout,
		fmt.Errorf("%w: no connection to %s within %v", ErrUnreachable, addr, p.cfg.DialTimeout))
	defer cancel()
	stop := context.AfterFunc(p.closing, cancel)
	defer stop()
	c, err := dialConn(dctx, addr, p.cfg)
	if err != nil {
		if p.closing.Err() != nil {
			return nil, ErrClosed
		}
		return nil, err
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		c.close()
		return nil, ErrClosed
	}
	p.readers.Add(2)
	p.mu.Unlock()
	go func() {
		defer p.readers.Done()
		c.readLoop()
	}()
	go func() {
		defer p.readers.Done()
		c.writeLoop()
	}()
	p.cfg.Logger.Debug("client: connected", "addr", addr)
	return c, nil
}

// close breaks every connection and waits for their readers to exit.
// Callers blocked in a request get ErrClosed.
func (p *pool) close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	hosts := p.hosts
	p.hosts = nil
	p.mu.Unlock()
	p.cancel()
	for _, h := range hosts {
		for i := range h.slots {
			s := &h.slots[i]
			// A dial in progress holds the slot; it sees the pool closed
			// and closes what it dialled itself.
			s.lock <- struct{}{}
			if s.c != nil {
				s.c.close()
			}
			<-s.lock
		}
	}
	p.readers.Wait()
}
