package shardstore

import (
	"encoding/binary"
	"fmt"
)

// Key space prefixes; see the package doc for the layout.
const (
	prefixShard byte = 0x01
	prefixTopic byte = 0x02
	prefixTomb  byte = 0x03
	// prefixProducer: a topic's producer sessions (producers.go).
	prefixProducer byte = 0x04

	kindState byte = 0x01
	kindLog   byte = 0x02
	kindData  byte = 0x03

	stateHardState byte = 0x01
	stateApplied   byte = 0x02
	stateTruncated byte = 0x03
	stateConfState byte = 0x04
)

const (
	shardPrefixLen = 1 + 8     // prefix, shard
	stateKeyLen    = 1 + 8 + 2 // prefix, shard, kind, state kind
	logKeyLen      = 1 + 8 + 9 // prefix, shard, kind, index
	dataPrefixLen  = 1 + 8 + 1 // prefix, shard, kind
	maxKeyScratch  = 1 + 1 + 255 + 8
)

func appendShardPrefix(dst []byte, shard uint64) []byte {
	dst = append(dst, prefixShard)
	return binary.BigEndian.AppendUint64(dst, shard)
}

func appendStateKey(dst []byte, shard uint64, kind byte) []byte {
	dst = appendShardPrefix(dst, shard)
	return append(dst, kindState, kind)
}

func appendLogKey(dst []byte, shard, index uint64) []byte {
	dst = appendShardPrefix(dst, shard)
	dst = append(dst, kindLog)
	return binary.BigEndian.AppendUint64(dst, index)
}

func appendDataKey(dst []byte, shard uint64, key []byte) []byte {
	dst = appendShardPrefix(dst, shard)
	dst = append(dst, kindData)
	return append(dst, key...)
}

func appendTombKey(dst []byte, shard uint64) []byte {
	dst = append(dst, prefixTomb)
	return binary.BigEndian.AppendUint64(dst, shard)
}

// shardSpan is the key range holding everything of one shard.
func shardSpan(shard uint64) (lo, hi []byte) {
	lo = appendShardPrefix(make([]byte, 0, shardPrefixLen), shard)
	if shard == ^uint64(0) {
		return lo, []byte{prefixShard + 1}
	}
	return lo, appendShardPrefix(make([]byte, 0, shardPrefixLen), shard+1)
}

// logSpan is the key range of a shard's log entries with index in [from, to).
func logSpan(shard, from, to uint64) (lo, hi []byte) {
	lo = appendLogKey(make([]byte, 0, logKeyLen), shard, from)
	if to == 0 { // to the end of the log
		hi = appendShardPrefix(make([]byte, 0, logKeyLen), shard)
		return lo, append(hi, kindLog+1)
	}
	return lo, appendLogKey(make([]byte, 0, logKeyLen), shard, to)
}

// dataSpan is the key range of a shard's state-machine data under prefix.
func dataSpan(shard uint64, prefix []byte) (lo, hi []byte) {
	lo = appendDataKey(make([]byte, 0, dataPrefixLen+len(prefix)), shard, prefix)
	hi = prefixEnd(lo)
	return lo, hi
}

// prefixEnd is the smallest key greater than every key starting with p.
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil // p is all 0xff: no upper bound
}

func appendTopicPrefix(dst, topic []byte) []byte {
	dst = append(dst, prefixTopic, byte(len(topic)))
	return append(dst, topic...)
}

func appendTopicKey(dst, topic []byte, offset uint64) []byte {
	dst = appendTopicPrefix(dst, topic)
	return binary.BigEndian.AppendUint64(dst, offset)
}

// keyString names a key in errors: its shard and what it is.
func keyString(key []byte) string {
	if len(key) >= shardPrefixLen+1 && key[0] == prefixShard {
		shard := binary.BigEndian.Uint64(key[1:])
		rest := key[shardPrefixLen:]
		switch {
		case rest[0] == kindState && len(rest) == 2:
			return fmt.Sprintf("shard %d state/%s", shard, stateName(rest[1]))
		case rest[0] == kindLog && len(rest) == 9:
			return fmt.Sprintf("shard %d log/%d", shard, binary.BigEndian.Uint64(rest[1:]))
		case rest[0] == kindData:
			return fmt.Sprintf("shard %d data/%q", shard, rest[1:])
		}
	}
	if len(key) >= 2 && key[0] == prefixTopic && len(key) >= 2+int(key[1]) {
		topic := key[2 : 2+int(key[1])]
		if rest := key[2+int(key[1]):]; len(rest) == 8 {
			return fmt.Sprintf("topic %q offset %d", topic, binary.BigEndian.Uint64(rest))
		}
		return fmt.Sprintf("topic %q meta", topic)
	}
	if len(key) >= 2 && key[0] == prefixProducer && len(key) == 2+int(key[1])+8 {
		return fmt.Sprintf("topic %q producer %x", key[2:2+int(key[1])], binary.BigEndian.Uint64(key[len(key)-8:]))
	}
	if len(key) == 9 && key[0] == prefixTomb {
		return fmt.Sprintf("shard %d tombstone", binary.BigEndian.Uint64(key[1:]))
	}
	return fmt.Sprintf("key %x", key)
}

func stateName(k byte) string {
	switch k {
	case stateHardState:
		return "hardstate"
	case stateApplied:
		return "applied"
	case stateTruncated:
		return "truncated"
	case stateConfState:
		return "confstate"
	}
	return fmt.Sprintf("kind-%d", k)
}
