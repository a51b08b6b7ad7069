package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/shoalmq/shoal/client"
)

// devChild is one `shoal node` child process of `shoal dev --processes`.
type devChild struct {
	id, client, metrics, log string
	args                     []string
	cmd                      *exec.Cmd
	exited                   chan struct{} // closed when Wait returned; err is then set
	err                      error
}

// devReadyPoll is how often the parent asks each child whether it is
// ready.
const (
	devReadyPoll     = 100 * time.Millisecond
	devStatusTimeout = 2 * time.Second
)

// runDevProcesses runs each node as a child `shoal node` process, so that
// one can be killed alone (kill -9 PID) to watch a failover. Ctrl-C sends
// each child SIGTERM and waits for its graceful leave.
func runDevProcesses(ctx context.Context, o *devOptions, dir, keep string, stdout io.Writer) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own binary: %w", err)
	}
	seeds := make([]string, o.nodes)
	for i := range o.nodes {
		_, _, seeds[i] = o.devAddrs(i + 1)
	}
	children := make([]*devChild, 0, o.nodes)
	defer func() { stopChildren(children) }()
	for i := 1; i <= o.nodes; i++ {
		id := "n" + strconv.Itoa(i)
		clientAddr, peer, swim := o.devAddrs(i)
		c := &devChild{
			id: id, client: clientAddr, log: filepath.Join(dir, id+".log"),
			metrics: "127.0.0.1:" + strconv.Itoa(o.basePort+300+i),
		}
		c.args = []string{"node", "--id", id, "--rack", devRack, "--data", filepath.Join(dir, id),
			"--client-addr", clientAddr, "--peer-addr", peer, "--swim-addr", swim,
			"--join", strings.Join(seeds, ","), "--bootstrap-expect", strconv.Itoa(o.nodes),
			"--replicas", strconv.Itoa(o.replicas),
			"--swim-preset", "fast", "--metrics-addr", c.metrics,
			"--log-format", o.logFormat, "--log-level", min(o.logLevel, slog.LevelInfo).String()}
		if o.shards != 0 {
			c.args = append(c.args, "--shards", strconv.FormatUint(uint64(o.shards), 10))
		}
		if err := c.start(self); err != nil {
			return err
		}
		children = append(children, c)
	}
	start := time.Now()
	for _, c := range children {
		fmt.Fprintf(stdout, "%s  pid %d  client %s  metrics %s  log %s\n", c.id, c.cmd.Process.Pid, c.client, c.metrics, c.log)
	}

	cl, err := client.New(client.Config{Servers: []string{children[0].client}})
	if err != nil {
		return err
	}
	defer cl.Close()
	for _, c := range children {
		if err := c.waitReady(ctx, cl); err != nil {
			if ctx.Err() != nil {
				fmt.Fprintln(stdout, "stopping")
				return nil
			}
			return err
		}
	}
	fmt.Fprintf(stdout, "ready in %s: %d node processes, %s, data in %s (%s); kill -9 a pid to see its topics move; Ctrl-C stops; try: %s assign topic-blue\n",
		time.Since(start).Round(10*time.Millisecond), o.nodes, o.shardsText(), dir, keep, shoalctlFor(childClients(children)))

	// Report children that end before Ctrl-C, with the command that
	// restarts one by hand.
	var wg sync.WaitGroup
	watch, stopWatch := context.WithCancel(ctx)
	defer func() { stopWatch(); wg.Wait() }()
	for _, c := range children {
		wg.Go(func() {
			select {
			case <-c.exited:
				fmt.Fprintf(stdout, "%s exited (%v); restart it with: %s %s\n", c.id, c.err, self, strings.Join(c.args, " "))
			case <-watch.Done():
			}
		})
	}
	<-ctx.Done()
	fmt.Fprintln(stdout, "stopping")
	return nil
}

func childClients(children []*devChild) []string {
	s := make([]string, len(children))
	for i, c := range children {
		s[i] = c.client
	}
	return s
}

func (c *devChild) start(self string) error {
	logf, err := os.OpenFile(c.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	c.cmd = exec.Command(self, c.args...)
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	// Its own process group: a Ctrl-C at the terminal reaches only the
	// parent, which then stops each child with one SIGTERM.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("%s: start: %w", c.id, err)
	}
	c.exited = make(chan struct{})
	go func() {
		c.err = c.cmd.Wait()
		_ = logf.Close()
		close(c.exited)
	}()
	return nil
}

// waitReady polls the child's status until it says ready.
func (c *devChild) waitReady(ctx context.Context, cl *client.Client) error {
	for {
		sctx, cancel := context.WithTimeout(ctx, devStatusTimeout)
		st, err := cl.Status(sctx, c.client)
		cancel()
		if err == nil && st.Ready {
			return nil
		}
		select {
		case <-c.exited:
			return fmt.Errorf("%s exited before it was ready (%v); see %s", c.id, c.err, c.log)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(devReadyPoll):
		}
	}
}

// stopChildren sends SIGTERM to every child still running and waits for
// them, killing any that outlives the graceful leave.
func stopChildren(children []*devChild) {
	for _, c := range children {
		_ = c.cmd.Process.Signal(syscall.SIGTERM) // an error once it exited
	}
	deadline := time.After(leaveTimeout + 5*time.Second)
	for _, c := range children {
		select {
		case <-c.exited:
		case <-deadline:
			_ = c.cmd.Process.Kill()
			<-c.exited
		}
	}
}
