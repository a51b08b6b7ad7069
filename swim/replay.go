package swim

// Replay protection of sealed datagrams. Every sealed datagram and
// push-pull carries its sender's sequence number, authenticated with the
// rest of the header; a receiver keeps, per sender, the highest number it
// took and which of the ReplayWindow numbers below it it took, and takes a
// number once. A captured datagram sent again is dropped (Stats.DropReplay);
// datagrams that arrive out of order within the window are taken. The
// window counts the sender's datagrams to every member, so it is wide: a
// push-pull, built before its TCP exchange, may arrive after hundreds of
// the sender's later datagrams.

// Limits of replay protection.
const (
	// ReplayWindow is how far below the highest sequence number taken
	// from a sender a datagram may be and still be taken (once): 1024
	// numbers, about a minute of one node's datagrams in a large cluster.
	ReplayWindow = 1024
	// MaxReplaySenders bounds the senders whose windows a node keeps.
	// Windows are made only for datagrams that opened under a cluster key,
	// and are never forgotten: a member reaped after its death must not
	// be brought back by its own old datagrams. Past the bound, datagrams
	// from new senders are dropped and counted as replays.
	MaxReplaySenders = 1 << 16
)

const replayWords = ReplayWindow / 64

// replayWindow is one sender's window: its generation, the highest
// sequence number taken in it, and a bitmap of the numbers taken in
// (top-ReplayWindow, top], bit seq%ReplayWindow.
type replayWindow struct {
	gen  uint64
	top  uint64
	bits [replayWords]uint64
}

// fresh reports whether seq of generation gen may be taken: a later
// generation (the sender restarted or rejoined), or a number of this one
// not taken yet and not below the window.
func (w *replayWindow) fresh(gen, seq uint64) bool {
	switch {
	case gen != w.gen:
		return gen > w.gen
	case seq > w.top:
		return true
	case w.top-seq >= ReplayWindow:
		return false
	}
	return w.bits[seq/64%replayWords]&(1<<(seq%64)) == 0
}

// take records seq of generation gen as taken; the caller checked fresh.
func (w *replayWindow) take(gen, seq uint64) {
	if gen != w.gen {
		*w = replayWindow{gen: gen, top: seq}
	} else if seq > w.top {
		if seq-w.top >= ReplayWindow {
			clear(w.bits[:])
		} else {
			// The numbers between the old top and seq leave a slot each
			// that held a number now below the window.
			for s := w.top + 1; s < seq; s++ {
				w.bits[s/64%replayWords] &^= 1 << (s % 64)
			}
		}
		w.top = seq
	}
	w.bits[seq/64%replayWords] |= 1 << (seq % 64)
}
