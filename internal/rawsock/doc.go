// Package rawsock reads and writes a TCP socket with raw system calls made
// inside the runtime poller's callbacks (syscall.RawConn), on Linux.
//
// The socket is non-blocking, so a read or write never sleeps in the
// kernel; one that cannot proceed (EAGAIN) hands back to the poller, which
// parks the goroutine until the socket is ready, as net.Conn does, and
// deadlines and Close act through the same poller. What a raw call saves
// is the runtime's system-call bookkeeping: a goroutine in net.Conn's Read
// or Write marks its P as in a system call, and sysmon, finding Ps in
// calls that last tens of microseconds on a VM where a system call is
// dear, keeps waking every 20 µs to hand them to other threads, which the
// returning goroutine must then win back. Under linearizable lookups
// sysmon took 12.9% of the nodes' CPU that way
// (docs/decisions/netio-raw-socket-calls.md).
package rawsock
