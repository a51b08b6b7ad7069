package node

import "github.com/zeebo/xxh3"

// RaftID maps a node id to the raft replica id of every replica the node
// hosts: xxh3 of the id, never zero (raft reserves 0 for "none"). Two ids
// with one raft id cannot share a cluster; the node refuses such a member.
func RaftID(id string) uint64 {
	h := xxh3.HashString(id)
	if h == 0 {
		h = 1
	}
	return h
}
