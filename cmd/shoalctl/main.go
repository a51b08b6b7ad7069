// Command shoalctl is the command-line client of a Shoal cluster: it
// assigns, looks up and revokes topics, produces and fetches records,
// shows members, shards and node status, and drains, undrains and removes
// nodes and moves shard leaderships. Run shoalctl --help for the
// commands; docs/cli.md documents the output and exit codes.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
