// Command shoal is the Shoal node binary. `shoal node` runs one node of a
// cluster; `shoal dev` runs a whole cluster on loopback in one process, for
// trying Shoal out. `shoal help` prints the usage; README.md and docs/cli.md explain both.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/shoalmq/shoal/internal/version"
)

const usage = `usage: shoal COMMAND [flags]

commands:
  node    run one node of a cluster         (shoal node --help for its flags)
  dev     run a local cluster on loopback   (shoal dev --help for its flags)
  help    print this text

flags:
  --version  print the version, commit and Go version, and exit
`

// Exit statuses.
const (
	exitOK    = 0
	exitFail  = 1 // the node could not start or failed while running
	exitUsage = 2 // a bad command line or config file; nothing was started
)

func main() {
	// The first SIGINT or SIGTERM cancels ctx and starts a graceful stop;
	// a second one, while that stop runs, ends the process at once.
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-sig
		cancel()
		<-sig
		fmt.Fprintln(os.Stderr, "shoal: second signal: exiting without a graceful stop")
		os.Exit(exitFail)
	}()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run runs one shoal command line and returns the exit status. Errors are
// one line on stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "shoal: missing command (want node, dev or help)")
		return exitUsage
	}
	var err error
	var cmdUsage string
	switch args[0] {
	case "node":
		cmdUsage = nodeUsage
		var o *nodeOptions
		if o, err = parseNodeArgs(args[1:], os.Getenv); err == nil {
			err = runNode(ctx, o, stderr)
		}
	case "dev":
		cmdUsage = devUsage
		var o *devOptions
		if o, err = parseDevArgs(args[1:]); err == nil {
			err = runDev(ctx, o, stdout, stderr)
		}
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, version.Get().String("shoal"))
		return exitOK
	default:
		fmt.Fprintf(stderr, "shoal: unknown command %q (want node, dev or help)\n", clip(args[0]))
		return exitUsage
	}
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errHelp):
		fmt.Fprint(stdout, cmdUsage)
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "shoal %s: %s\n", args[0], ue.msg)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "shoal %s: %v\n", args[0], err)
		return exitFail
	}
}
