package raftmux

import (
	"context"
	"fmt"
	"log/slog"
)

// raftLogger routes the raft library's log lines to slog. Its Info level is
// chatty (every election of every group), so it maps to Debug. Each line
// names the replica's shard (the raft library names only the node's raft
// id, the same in every group).
type raftLogger struct {
	l     *slog.Logger
	shard uint64
}

func (r raftLogger) log(level slog.Level, args []any) {
	if r.l.Enabled(context.Background(), level) {
		r.l.Log(context.Background(), level, fmt.Sprint(args...), "shard", r.shard)
	}
}

func (r raftLogger) logf(level slog.Level, format string, args []any) {
	if r.l.Enabled(context.Background(), level) {
		r.l.Log(context.Background(), level, fmt.Sprintf(format, args...), "shard", r.shard)
	}
}

func (r raftLogger) Debug(v ...any)                 { r.log(slog.LevelDebug-4, v) }
func (r raftLogger) Debugf(format string, v ...any) { r.logf(slog.LevelDebug-4, format, v) }
func (r raftLogger) Info(v ...any)                  { r.log(slog.LevelDebug, v) }
func (r raftLogger) Infof(format string, v ...any)  { r.logf(slog.LevelDebug, format, v) }
func (r raftLogger) Warning(v ...any)               { r.log(slog.LevelWarn, v) }
func (r raftLogger) Warningf(format string, v ...any) {
	r.logf(slog.LevelWarn, format, v)
}
func (r raftLogger) Error(v ...any)                 { r.log(slog.LevelError, v) }
func (r raftLogger) Errorf(format string, v ...any) { r.logf(slog.LevelError, format, v) }

// Fatal and Panic are raft invariant violations (a corrupted log or a
// library bug), not bad input; raft expects them not to return.
func (r raftLogger) Fatal(v ...any) { r.Panic(v...) }
func (r raftLogger) Fatalf(format string, v ...any) {
	r.Panicf(format, v...)
}
func (r raftLogger) Panic(v ...any) {
	s := fmt.Sprint(v...)
	r.l.Error(s, "shard", r.shard)
	panic(s)
}
func (r raftLogger) Panicf(format string, v ...any) {
	s := fmt.Sprintf(format, v...)
	r.l.Error(s, "shard", r.shard)
	panic(s)
}
