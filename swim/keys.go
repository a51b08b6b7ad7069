package swim

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/shoalmq/shoal/wire"
)

// ErrKeyFile: a SWIM key file line is not a key.
var ErrKeyFile = errors.New("swim: key file")

// maxKeyFile bounds a key file: a few keys of a few dozen characters.
const maxKeyFile = 64 << 10

// ParseKeys reads a SWIM key file: one key per line, base64 (standard
// alphabet, as "openssl rand -base64 32" prints it) of 16, 24 or 32 bytes,
// the primary first; '#' starts a comment and blank lines are ignored.
// Errors wrap ErrKeyFile, name the line and never show a key.
func ParseKeys(b []byte) ([][]byte, error) {
	if len(b) > maxKeyFile {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrKeyFile, maxKeyFile)
	}
	var keys [][]byte
	sc := bufio.NewScanner(bytes.NewReader(b))
	for line := 1; sc.Scan(); line++ {
		text, _, _ := strings.Cut(sc.Text(), "#")
		text = strings.TrimSpace(text)
		if text == "" {
			continue
		}
		key, err := base64.StdEncoding.DecodeString(text)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: not base64", ErrKeyFile, line)
		}
		if n := len(key); n != 16 && n != 24 && n != 32 {
			return nil, fmt.Errorf("%w: line %d: a key of %d bytes (want 16, 24 or 32)", ErrKeyFile, line, n)
		}
		for i, k := range keys {
			if bytes.Equal(k, key) {
				return nil, fmt.Errorf("%w: line %d: key %d again", ErrKeyFile, line, i+1)
			}
		}
		if len(keys) == wire.MaxSwimKeys {
			return nil, fmt.Errorf("%w: line %d: more than %d keys", ErrKeyFile, line, wire.MaxSwimKeys)
		}
		keys = append(keys, key)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeyFile, err)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no key in it", ErrKeyFile)
	}
	return keys, nil
}

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
// restart. See docs/security.md for the rotation steps.
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
