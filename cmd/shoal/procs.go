package main

import (
	"context"
	"log/slog"
	"os"
	"runtime"
	"time"

	"github.com/shoalmq/shoal/internal/cpulimit"
)

// A node held by its cgroup to at most one core runs on one P. The Go
// runtime's default gives such a process at least two, and a node's
// event loops, blocked in epoll_wait, keep Ps that the runtime's monitor
// keeps taking back and handing on: at 0.15 of a core three nodes on one P
// made 13-37% more assigns in seven pairs of eight
// (docs/decisions/node-one-p-under-one-core.md). The limit is read again
// every procsCheckInterval, since a process may be moved into a group
// after it started; GOMAXPROCS in the environment turns this off.

const procsCheckInterval = 5 * time.Second

// followCPULimit keeps GOMAXPROCS at 1 while the process's CPU limit is at
// most one core, and the runtime's default otherwise, until ctx ends.
func followCPULimit(ctx context.Context, logger *slog.Logger) {
	if os.Getenv("GOMAXPROCS") != "" {
		return
	}
	one := false
	check := func() {
		cores, ok, err := cpulimit.Limit()
		if err != nil {
			logger.Debug("reading the CPU limit", "err", err)
			return
		}
		want := ok && cores <= 1
		switch {
		case want && !one:
			runtime.GOMAXPROCS(1)
			logger.Info("one P: the CPU limit is at most one core", "cores", cores)
		case !want && one:
			runtime.SetDefaultGOMAXPROCS()
			logger.Info("the runtime's default Ps: the CPU limit is above one core or gone", "gomaxprocs", runtime.GOMAXPROCS(0))
		}
		one = want
	}
	check()
	go func() {
		t := time.NewTicker(procsCheckInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				check()
			}
		}
	}()
}
