package router

import "github.com/zeebo/xxh3"

// ShardOf maps a key (a topic name) to its shard: xxh3(key) mod shards.
// The shard count is fixed when a cluster is born, so every node computes the
// same answer. A shard count of zero is treated as one (everything maps to
// shard 0); callers validate the count where it is configured.
func ShardOf(key []byte, shards uint32) uint32 {
	if shards <= 1 {
		return 0
	}
	return uint32(xxh3.Hash(key) % uint64(shards))
}

// ShardOfString is ShardOf for a string key; it allocates nothing.
func ShardOfString(key string, shards uint32) uint32 {
	if shards <= 1 {
		return 0
	}
	return uint32(xxh3.HashString(key) % uint64(shards))
}
