package swim

import (
	"errors"
	"fmt"

	"github.com/shoalmq/shoal/wire"
)

// keys is the keyring the node starts with: Keys, or one key derived from
// Secret, or none.
func (c *Config) keys() [][]byte {
	if len(c.Keys) > 0 {
		return c.Keys
	}
	if len(c.Secret) > 0 {
		return [][]byte{wire.DeriveSwimKey(c.Secret)}
	}
	return nil
}

// ErrKeys: the keyring cannot be changed as asked.
var ErrKeys = errors.New("swim: keyring")

// SetKeys replaces the keyring, the primary first: datagrams are sealed
// with the primary from now on and opened with any of keys. A node started
// without keys (and so sending unsealed datagrams) cannot start sealing
// while it runs, nor a sealing one stop: a cluster changes that with a
// restart. See README.md for the rotation steps.
func (n *Node) SetKeys(keys [][]byte) error {
	if n.keys == nil {
		return fmt.Errorf("%w: this node started without keys (unsealed SWIM): restart it with keys", ErrKeys)
	}
	ring, err := wire.NewSwimKeyring(keys)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrKeys, err)
	}
	n.keys = ring
	return nil
}

// KeyCount reports the keys of the keyring (0: unsealed).
func (n *Node) KeyCount() int {
	if n.keys == nil {
		return 0
	}
	return n.keys.Len()
}

// open checks a received datagram (or push-pull, pushPull) whose header h
// ends at off in b, and returns its body to decode: as it is when this
// node has no keys, opened when it has. Sealed input is refused without
// keys, unsealed input with them; a sealed datagram must name this node
// as its recipient (a push-pull may name none), open under a key of the
// ring, and carry a sequence number its sender's replay window has not
// taken. Every refusal is counted.
func (n *Node) open(b []byte, off int, h *wire.SwimHeader, pushPull bool) ([]byte, bool) {
	if n.keys == nil {
		if h.Sealed {
			n.stats.DropAuth++
			return nil, false
		}
		if string(h.Sender) == n.self.ID {
			n.stats.DropSelf++
			return nil, false
		}
		return b[off:], true
	}
	if !h.Sealed {
		n.stats.DropAuth++
		return nil, false
	}
	if string(h.Recipient) != n.self.ID && (!pushPull || len(h.Recipient) > 0) {
		n.stats.DropWrongTarget++
		return nil, false
	}
	w := n.replay[string(h.Sender)]
	if w != nil && !w.fresh(h.Generation, h.Seq) {
		n.stats.DropReplay++
		return nil, false
	}
	buf := n.plain[:0]
	if pushPull {
		buf = nil // a push-pull is up to wire.MaxFrame: its own buffer
	}
	body, err := n.keys.Open(buf, b, off, h)
	if err != nil {
		n.stats.DropAuth++
		return nil, false
	}
	if string(h.Sender) == n.self.ID {
		n.stats.DropSelf++
		return nil, false
	}
	if w == nil {
		if len(n.replay) >= MaxReplaySenders {
			n.stats.DropReplay++
			return nil, false
		}
		w = &replayWindow{}
		n.replay[string(h.Sender)] = w
	}
	w.take(h.Generation, h.Seq)
	return body, true
}
