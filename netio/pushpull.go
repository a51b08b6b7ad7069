package netio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/shoalmq/shoal/wire"
)

// PushPull carries SWIM's full-state exchange over TCP: one KindPushPull
// frame each way per connection. It is rare traffic (a join, one exchange
// per node every half minute or so), so it uses plain net.Conn, not the
// event loops.
type PushPull struct {
	ln      net.Listener
	timeout time.Duration
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	closed  bool
}

// ErrPushPull wraps push-pull transport errors.
var ErrPushPull = errors.New("netio: push-pull")

// ListenPushPull listens on addr (TCP). timeout bounds a whole exchange
// (5 s when zero).
func ListenPushPull(addr string, timeout time.Duration) (*PushPull, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w: listen %s: %w", ErrPushPull, addr, err)
	}
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	return &PushPull{ln: ln, timeout: timeout, conns: make(map[net.Conn]struct{})}, nil
}

// Addr is the listening address.
func (p *PushPull) Addr() net.Addr { return p.ln.Addr() }

// Serve answers exchanges with h until Close; it returns nil after Close.
func (p *PushPull) Serve(h func(req []byte) ([]byte, error)) error {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			p.mu.Lock()
			closed := p.closed
			p.mu.Unlock()
			if closed {
				return nil
			}
			return fmt.Errorf("%w: accept: %w", ErrPushPull, err)
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			return nil
		}
		p.conns[c] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go func() {
			defer p.wg.Done()
			defer func() {
				p.mu.Lock()
				delete(p.conns, c)
				p.mu.Unlock()
				c.Close()
			}()
			_ = c.SetDeadline(time.Now().Add(p.timeout))
			req, id, err := readPushPull(c)
			if err != nil {
				return
			}
			reply, err := h(req)
			if err != nil {
				return
			}
			_ = writePushPull(c, id, reply)
		}()
	}
}

// Close stops Serve and waits for the exchanges in progress.
func (p *PushPull) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

// Exchange dials addr, sends req and returns the answer's payload.
func (p *PushPull) Exchange(ctx context.Context, addr string, req []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w: dial %s: %w", ErrPushPull, addr, err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	if err := writePushPull(c, 1, req); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrPushPull, addr, err)
	}
	reply, _, err := readPushPull(c)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrPushPull, addr, err)
	}
	return reply, nil
}

func writePushPull(w io.Writer, id uint64, payload []byte) error {
	b, start := wire.BeginFrame(make([]byte, 0, wire.HeaderSize+len(payload)), wire.KindPushPull, id)
	b = append(b, payload...)
	b, err := wire.EndFrame(b, start)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

func readPushPull(r io.Reader) ([]byte, uint64, error) {
	var hb [wire.HeaderSize]byte
	if _, err := io.ReadFull(r, hb[:]); err != nil {
		return nil, 0, err
	}
	var h wire.Header
	if err := wire.DecodeHeader(hb[:], &h); err != nil {
		return nil, 0, err
	}
	if h.Kind != wire.KindPushPull || h.Flags != 0 {
		return nil, 0, wire.ErrUnknownKind
	}
	b := make([]byte, h.Length)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, 0, err
	}
	return b, h.RequestID, nil
}
