package life

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Errors of the life cycle.
var (
	// ErrStarted: Begin called twice.
	ErrStarted = errors.New("node: already started")
	// ErrClosed: Begin called once closing.
	ErrClosed = errors.New("node: closed")
)

// WorkerIdle is how long a started node's worker waits for more work
// before it ends.
const WorkerIdle = 5 * time.Second

// Cycle is one node's life cycle and the work it spawns. Its zero value
// is not ready: use New.
type Cycle struct {
	mu      sync.RWMutex
	started bool
	closing bool
	ctx     context.Context
	cancel  context.CancelFunc
	// goFn runs spawned work on a driven node; nil on a started one
	// (workers).
	goFn func(f func())
	// yieldFn runs the rest of a piece of work on a driven node; nil on a
	// started one, which goes straight on.
	yieldFn func(f func())

	wg sync.WaitGroup
	// work hands spawned work to an idle worker of a started node.
	work chan func()
}

// New returns a Cycle not yet begun.
func New() *Cycle { return &Cycle{work: make(chan func())} }

// Begin begins the life: of a started node when goFn is nil (spawned work
// on workers, Resume at once), of a driven one otherwise (spawned work
// through goFn, the rest of a piece of work through yieldFn, or goFn when
// that is nil). It fails with ErrStarted when it began already, with
// ErrClosed once closing.
func (c *Cycle) Begin(goFn, yieldFn func(f func())) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return ErrStarted
	}
	if c.closing {
		return ErrClosed
	}
	if goFn != nil && yieldFn == nil {
		yieldFn = goFn
	}
	c.started = true
	c.goFn, c.yieldFn = goFn, yieldFn
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return nil
}

// Running reports whether the life began and is not closing.
func (c *Cycle) Running() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.started && !c.closing
}

// Close says the node is closing, once every Enter before it has Exited,
// and reports whether the life began (Cancel and Wait are then due).
func (c *Cycle) Close() (started bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closing = true
	return c.started
}

// Cancel stops what waits on Done: the idle workers and the node's
// goroutines. Only after Begin.
func (c *Cycle) Cancel() { c.cancel() }

// Wait waits for the goroutines the Cycle started to end.
func (c *Cycle) Wait() { c.wg.Wait() }

// Done is closed by Cancel. Only after Begin.
func (c *Cycle) Done() <-chan struct{} { return c.ctx.Done() }

// Stopped reports whether Cancel was called. Only after Begin.
func (c *Cycle) Stopped() bool { return c.ctx.Err() != nil }

// Go runs fn on a goroutine that Wait waits for.
func (c *Cycle) Go(fn func()) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		fn()
	}()
}

// Enter reports true, and keeps Close waiting until Exit, unless the node
// is closing.
func (c *Cycle) Enter() bool {
	c.mu.RLock()
	if c.closing {
		c.mu.RUnlock()
		return false
	}
	return true
}

// Exit ends what a true Enter began.
func (c *Cycle) Exit() { c.mu.RUnlock() }

// Spawn runs fn soon, on its own (a worker of a started node, a piece of
// work its caller schedules on a driven one), unless the node is closing;
// it reports whether fn will run.
func (c *Cycle) Spawn(fn func()) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closing {
		return false
	}
	if c.goFn != nil {
		c.goFn(fn)
		return true
	}
	select {
	case c.work <- fn: // an idle worker took it
		return true
	default:
	}
	var stop <-chan struct{}
	if c.ctx != nil {
		stop = c.ctx.Done()
	}
	c.wg.Add(1)
	go c.worker(fn, stop)
	return true
}

// worker runs fn, then whatever Spawn hands it while it is idle, until it
// has been idle WorkerIdle or the node stops.
func (c *Cycle) worker(fn func(), stop <-chan struct{}) {
	defer c.wg.Done()
	fn()
	idle := time.NewTimer(WorkerIdle)
	defer idle.Stop()
	for {
		select {
		case fn := <-c.work:
			fn()
			idle.Reset(WorkerIdle)
		case <-idle.C:
			return
		case <-stop:
			return
		}
	}
}

// Resume runs fn, the rest of a piece of work: at once on a started node,
// as its caller chooses on a driven one, which may pause or crash the
// node in between. A closing driven node runs it at once.
func (c *Cycle) Resume(fn func()) {
	c.mu.RLock()
	y := c.yieldFn
	if c.closing {
		y = nil
	}
	c.mu.RUnlock()
	if y == nil {
		fn()
		return
	}
	y(fn)
}
