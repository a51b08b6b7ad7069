package wire

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

// Sealing SWIM traffic. A keyring holds the cluster's SWIM keys, the
// primary first: a node seals with the primary and opens with any key, so
// a key is rotated by adding the new one everywhere, then making it primary
// everywhere, then removing the old one.
//
// A sealed datagram or push-pull is encrypted and authenticated with
// AES-256-GCM. The key is not used directly: each sender life has a subkey,
// HMAC-SHA256(key, "shoal swim v4 subkey" ‖ salt ‖ sender), where the salt
// is 8 random bytes the sender draws once per life, and the nonce is the
// sender's sequence number, which rises with every sealed datagram. A nonce
// is therefore never used twice under one subkey, however many datagrams a
// cluster sends under one key, without a random nonce on the wire. The
// header (cluster, sender, generation, recipient, key id, salt, sequence)
// is the additional data: a receiver that opens a body knows who sent it,
// to whom, in which life, and at which sequence number, which is what its
// replay window needs (swim keeps one per sender).

// Limits of a keyring.
const (
	// MaxSwimKeys bounds the keys of a keyring: a primary and the keys of
	// one or two rotations in progress need far fewer.
	MaxSwimKeys = 16
	// maxSwimSubkeyCache bounds the senders whose subkeys a keyring keeps;
	// past it the cache is emptied and rebuilt as datagrams arrive.
	maxSwimSubkeyCache = 1 << 14
)

// swimSubkeyLabel separates SWIM subkeys from any other use of the key.
const swimSubkeyLabel = "shoal swim v4 subkey"

// swimKeyIDLabel separates key ids from any other hash of the key.
const swimKeyIDLabel = "shoal swim v4 key id"

// SwimKeyring seals SWIM bodies with its primary key and opens them with
// any of its keys. It keeps the subkeys it derives, so that sealing and
// opening allocate nothing once a sender is known. Not safe for concurrent
// use: the SWIM core that owns it calls it under its lock.
type SwimKeyring struct {
	keys []swimKey
	// seal is the subkey of the last (key, salt, sender) sealed with.
	seal swimSubkey
	// open holds, by sender, the subkeys of the lives last opened.
	open map[string]*swimSenderKeys
	// nonce is scratch space: a local array would escape to the heap
	// through the AEAD interface.
	nonce [12]byte
}

type swimKey struct {
	id  uint32
	key []byte
}

type swimSubkey struct {
	keyID uint32
	salt  uint64
	who   string
	aead  cipher.AEAD
}

// swimSenderKeys are the subkeys of one sender: during a rotation it seals
// with another key than before, so a few are kept.
type swimSenderKeys struct {
	subkeys [2]swimSubkey
	next    int
}

// NewSwimKeyring returns a keyring of keys, the primary first. Each key is
// 16, 24 or 32 bytes (an AES key: what `openssl rand -base64 32` gives,
// decoded); keys must differ.
func NewSwimKeyring(keys [][]byte) (*SwimKeyring, error) {
	if len(keys) == 0 || len(keys) > MaxSwimKeys {
		return nil, fmt.Errorf("%w: a SWIM keyring holds 1 to %d keys, not %d", ErrMalformed, MaxSwimKeys, len(keys))
	}
	k := &SwimKeyring{open: make(map[string]*swimSenderKeys)}
	for i, key := range keys {
		switch len(key) {
		case 16, 24, 32:
		default:
			return nil, fmt.Errorf("%w: SWIM key %d is %d bytes, want 16, 24 or 32", ErrMalformed, i+1, len(key))
		}
		id := SwimKeyID(key)
		for _, o := range k.keys {
			if o.id == id {
				return nil, fmt.Errorf("%w: SWIM key %d repeats an earlier key", ErrMalformed, i+1)
			}
		}
		k.keys = append(k.keys, swimKey{id: id, key: append([]byte(nil), key...)})
	}
	return k, nil
}

// SwimKeyID is the id under which a key is named in sealed headers: the
// first four bytes of an HMAC of a fixed label under the key, so that it
// says nothing of the key.
func SwimKeyID(key []byte) uint32 {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(swimKeyIDLabel))
	return binary.LittleEndian.Uint32(m.Sum(nil))
}

// DeriveSwimKey makes a SWIM key from the cluster's shared secret, for a
// cluster that has no key file: 32 bytes of HMAC-SHA256 under the secret.
func DeriveSwimKey(secret []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("shoal swim v4 key from the cluster secret"))
	return m.Sum(nil)
}

// Primary is the id of the key bodies are sealed with.
func (k *SwimKeyring) Primary() uint32 { return k.keys[0].id }

// Len is the number of keys.
func (k *SwimKeyring) Len() int { return len(k.keys) }

func (k *SwimKeyring) key(id uint32) []byte {
	for i := range k.keys {
		if k.keys[i].id == id {
			return k.keys[i].key
		}
	}
	return nil
}

// subkey derives the AEAD of sender's life salt under key.
func subkey(key []byte, salt uint64, sender []byte) (cipher.AEAD, error) {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(swimSubkeyLabel))
	var b [9]byte
	binary.LittleEndian.PutUint64(b[:8], salt)
	b[8] = byte(len(sender))
	m.Write(b[:])
	m.Write(sender)
	block, err := aes.NewCipher(m.Sum(nil))
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// nonceOf is the AES-GCM nonce of a sequence number: its eight bytes,
// then four zero bytes.
func (k *SwimKeyring) nonceOf(seq uint64) []byte {
	binary.LittleEndian.PutUint64(k.nonce[:8], seq)
	return k.nonce[:]
}

// Seal encrypts the body of the sealed datagram or push-pull that starts
// at start in b (header up to bodyOff, as AppendSwimHeader wrote it from
// h, then the body) and appends the tag. h.KeyID must be Primary().
func (k *SwimKeyring) Seal(b []byte, start, bodyOff int, h *SwimHeader) ([]byte, error) {
	if !h.Sealed || start < 0 || bodyOff < start || bodyOff > len(b) || h.KeyID != k.Primary() {
		return b, ErrMalformed
	}
	s := &k.seal
	if s.aead == nil || s.keyID != h.KeyID || s.salt != h.Salt || s.who != string(h.Sender) {
		aead, err := subkey(k.keys[0].key, h.Salt, h.Sender)
		if err != nil {
			return b, err
		}
		*s = swimSubkey{keyID: h.KeyID, salt: h.Salt, who: string(h.Sender), aead: aead}
	}
	if cap(b)-len(b) < SwimTagSize {
		nb := make([]byte, len(b), len(b)+SwimTagSize)
		copy(nb, b)
		b = nb
	}
	out := s.aead.Seal(b[bodyOff:bodyOff], k.nonceOf(h.Seq), b[bodyOff:], b[start:bodyOff])
	return b[:bodyOff+len(out)], nil
}

// Open checks and decrypts the body of the sealed datagram or push-pull
// b, whose header h (decoded from b) ends at bodyOff, and appends the
// plaintext to dst. Errors: ErrUnknownKey (h names no key of the keyring),
// ErrAuth (the body or header was not sealed by a holder of that key),
// ErrMalformed (h is not a sealed header).
func (k *SwimKeyring) Open(dst, b []byte, bodyOff int, h *SwimHeader) ([]byte, error) {
	if !h.Sealed || bodyOff > len(b) || len(b)-bodyOff < SwimTagSize {
		return dst, ErrMalformed
	}
	ks := k.open[string(h.Sender)]
	var aead cipher.AEAD
	if ks != nil {
		for i := range ks.subkeys {
			if s := &ks.subkeys[i]; s.aead != nil && s.keyID == h.KeyID && s.salt == h.Salt {
				aead = s.aead
				break
			}
		}
	}
	fresh := aead == nil
	if fresh {
		key := k.key(h.KeyID)
		if key == nil {
			return dst, ErrUnknownKey
		}
		var err error
		if aead, err = subkey(key, h.Salt, h.Sender); err != nil {
			return dst, err
		}
	}
	out, err := aead.Open(dst, k.nonceOf(h.Seq), b[bodyOff:], b[:bodyOff])
	if err != nil {
		return dst, ErrAuth
	}
	if fresh {
		// Kept only once it opened something: input from nobody in
		// particular never fills the cache.
		if ks == nil {
			if len(k.open) >= maxSwimSubkeyCache {
				clear(k.open)
			}
			ks = &swimSenderKeys{}
			k.open[string(h.Sender)] = ks
		}
		ks.subkeys[ks.next] = swimSubkey{keyID: h.KeyID, salt: h.Salt, aead: aead}
		ks.next = (ks.next + 1) % len(ks.subkeys)
	}
	return out, nil
}
