package client

import "time"

// RetryWindow bounds how long after its first attempt a write is retried:
// a write still unanswered then fails with its last error, its outcome
// unknown. Each write (Assign, Revoke, UpdatePartitions, Produce) carries
// the client's session and a sequence number that every retry repeats, so
// a shard that applied it answers a retry with its first answer instead of
// applying it again. The cluster keeps a session's answers for
// meta.SessionTTL (five minutes) after its last write, far longer than
// this, so every retry the client sends finds the first answer if the
// write was applied.
const RetryWindow = time.Minute
