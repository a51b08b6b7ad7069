package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/shoalmq/shoal/client"
	"github.com/shoalmq/shoal/internal/version"
	"github.com/shoalmq/shoal/wire"
)

// Exit codes.
const (
	exitOK          = 0
	exitFailed      = 1 // the cluster refused or failed the request, or broke the protocol
	exitUsage       = 2 // the command line is wrong; nothing was sent
	exitUnreachable = 3 // no server answered in time
)

// Retry budget of the command: with the client's 50ms base, waits of at
// most 0.05+0.1+0.2+0.4+0.8+1 s between attempts.
const (
	cliMaxRetries = 6
	cliBackoffMax = time.Second
)

// run executes one command line and returns the exit code. Results go to
// stdout, errors to stderr as one line.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	inv, err := parseArgs(args, getenv)
	if errors.Is(err, errVersion) {
		fmt.Fprintln(stdout, version.Get().String("shoalctl"))
		return exitOK
	}
	if errors.Is(err, errHelp) {
		text := usage
		if inv.helpCmd != "" {
			text = commandHelp[inv.helpCmd]
		}
		_, _ = io.WriteString(stdout, text)
		return exitOK
	}
	if err != nil {
		writeError(stderr, "Usage", err.Error(), inv.json)
		return exitUsage
	}
	switch inv.cmd {
	case "bench":
		return runBench(ctx, inv, stdout, stderr)
	case "completion":
		if err := writeCompletion(stdout, inv.shell); err != nil {
			writeError(stderr, "Output", err.Error(), inv.json)
			return exitFailed
		}
		return exitOK
	}
	if inv.cmd == "watch" {
		return runWatch(ctx, inv, stdout, stderr)
	}
	c, code := newClient(inv, stderr)
	if c == nil {
		return code
	}
	defer c.Close()
	if inv.fromStdin {
		return produceLines(ctx, c, inv, stdin, stdout, stderr)
	}
	if !inv.listsAll() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, inv.timeout,
			fmt.Errorf("no answer within --timeout %v", inv.timeout))
		defer cancel()
	}
	res, err := execute(ctx, c, inv, stderr)
	if err != nil {
		return fail(stderr, inv, err)
	}
	if f, ok := res.(fetchedResult); ok && inv.format != "text" {
		res = formattedFetch{r: f, format: inv.format}
	}
	if err := writeResult(stdout, res, inv.json); err != nil {
		writeError(stderr, "Output", err.Error(), inv.json)
		return exitFailed
	}
	return exitOK
}

// newClient returns the client the invocation describes, or nil and the
// exit code after saying on stderr what is wrong.
func newClient(inv *invocation, stderr io.Writer) (*client.Client, int) {
	cfg, err := clientConfig(inv)
	if err == nil {
		var c *client.Client
		if c, err = client.New(cfg); err == nil {
			return c, exitOK
		}
	}
	writeError(stderr, "Usage", err.Error(), inv.json)
	return nil, exitUsage
}

// runWatch prints the changes of a watch until ctx ends (an interrupt):
// then it prints, on stderr, the position to resume from, and exits 0. A
// watch that fails says the position in its one error line (unless the
// position is what failed: compacted).
func runWatch(ctx context.Context, inv *invocation, stdout, stderr io.Writer) int {
	c, code := newClient(inv, stderr)
	if c == nil {
		return code
	}
	defer c.Close()
	// --timeout bounds the start (and each request): a watch then runs
	// until interrupted.
	sctx, cancel := context.WithTimeoutCause(ctx, inv.timeout, fmt.Errorf("no answer within --timeout %v", inv.timeout))
	w, err := c.Watch(sctx, client.WatchOptions{Topic: inv.topic, Prefix: inv.prefix, From: inv.position, Splits: inv.splits})
	cancel()
	if err != nil {
		return fail(stderr, inv, err)
	}
	if !inv.json {
		if _, err := io.WriteString(stdout, watchHeader); err != nil {
			return exitFailed
		}
	}
	for {
		ch, err := w.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				fmt.Fprintf(stderr, "shoalctl: watch stopped; resume with --from %s\n", w.Position())
				return exitOK
			}
			if !errors.Is(err, client.ErrCompacted) {
				err = fmt.Errorf("%w; resume with --from %s", err, w.Position())
			}
			return fail(stderr, inv, err)
		}
		if err := writeChange(stdout, ch, inv.json); err != nil {
			writeError(stderr, "Output", err.Error(), inv.json)
			return exitFailed
		}
	}
}

// clientConfig is the client's configuration for inv; it reads the TLS
// files, if any.
func clientConfig(inv *invocation) (client.Config, error) {
	tlsCfg, err := inv.tlsConfig()
	if err != nil {
		return client.Config{}, err
	}
	return client.Config{
		Servers:        inv.servers,
		ClusterID:      inv.clusterID,
		Secret:         inv.secret,
		Token:          inv.token,
		TLS:            tlsCfg,
		DialTimeout:    min(client.DefaultDialTimeout, inv.timeout),
		RequestTimeout: inv.requestTimeout(),
		// A person is waiting: give up on a down cluster within about two
		// seconds, still long enough to ride out a leader election.
		MaxRetries: cliMaxRetries,
		BackoffMax: cliBackoffMax,
	}, nil
}

// listsAll reports whether the invocation lists every topic (topics
// --all): page after page, for as long as the cluster has pages (millions
// of topics take tens of seconds), each page within --timeout.
func (inv *invocation) listsAll() bool { return inv.cmd == "topics" && inv.all }

// requestTimeout bounds one request: the whole --timeout, but for drain
// and remove, whose --timeout bounds the wait for the cluster's work.
func (inv *invocation) requestTimeout() time.Duration {
	if inv.cmd == "drain" || inv.cmd == "remove" {
		return min(inv.timeout, defaultTimeout)
	}
	return inv.timeout
}

// fail prints the one line of a command that failed with err and returns
// the exit code.
func fail(stderr io.Writer, inv *invocation, err error) int {
	code, status := classify(err)
	msg := err.Error()
	if code == "Unreachable" {
		msg += " (servers: " + strings.Join(inv.servers, ",") + "; set --servers or SHOAL_SERVERS)"
	}
	writeError(stderr, code, msg, inv.json)
	return status
}

// maxPEMFile bounds a CA, certificate or key file.
const maxPEMFile = 1 << 20

// tlsConfig reads the TLS files of the invocation: nil without --tls-ca.
func (inv *invocation) tlsConfig() (*tls.Config, error) {
	if inv.tlsCA == "" {
		return nil, nil
	}
	ca, err := readPEM(inv.tlsCA)
	if err != nil {
		return nil, usagef("--tls-ca: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, usagef("--tls-ca %s holds no PEM certificate", clip(inv.tlsCA))
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}
	if inv.tlsCert != "" {
		pair, err := tls.LoadX509KeyPair(inv.tlsCert, inv.tlsKey)
		if err != nil {
			return nil, usagef("--tls-cert/--tls-key: %v", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

func readPEM(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPEMFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxPEMFile {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxPEMFile)
	}
	return b, nil
}

// execute runs the command with the client; the admin commands say how
// far they came on progress as they run.
func execute(ctx context.Context, c *client.Client, inv *invocation, progress io.Writer) (result, error) {
	switch inv.cmd {
	case "assign":
		a, err := c.Assign(ctx, inv.topic, client.AssignOptions{Owner: inv.owner, Partitions: inv.partitions})
		return assignmentResult(a), err
	case "lookup":
		a, err := c.Lookup(ctx, inv.topic, inv.linearizable)
		return assignmentResult(a), err
	case "revoke":
		r, err := c.Revoke(ctx, inv.topic)
		return revokedResult(r), err
	case "produce":
		p, err := c.Produce(ctx, inv.topic, [][]byte{[]byte(inv.msg)})
		return producedResult(p), err
	case "fetch":
		f, err := c.Fetch(ctx, inv.topic, inv.from, inv.maxBytes)
		return fetchedResult(f), err
	case "members":
		m, err := c.Members(ctx)
		return membersResult(m), err
	case "shards":
		s, err := c.Shards(ctx)
		return shardsResult(s), err
	case "status":
		s, err := c.Status(ctx, inv.statusAddr)
		return statusResult(s), err
	case "topics":
		if inv.all {
			return listAll(ctx, c, inv.prefix)
		}
		p, err := c.ListTopics(ctx, client.ListOptions{Prefix: inv.prefix, Limit: inv.limit, Cursor: inv.cursor})
		return topicsResult(p), err
	case "drain":
		var last client.DrainProgress
		d, err := c.Drain(ctx, inv.node, func(p client.DrainProgress) {
			if p != last {
				fmt.Fprintf(progress, "drain %s: %d topics and %d shard leaderships left\n", text(p.Node), p.Topics, p.Leaders)
				last = p
			}
		})
		return drainedResult(d), err
	case "undrain":
		p, err := c.Undrain(ctx, inv.node)
		if err == nil {
			fmt.Fprintf(progress, "undrain %s: it takes topics and shard leaderships again\n", text(p.Node))
		}
		return undrainedResult(p), err
	case "transfer-leader":
		stop := notifyAfter(progress, progressDelay, fmt.Sprintf("transfer-leader: shard %d to %s: waiting for it to take the leadership up\n", inv.shard, text(inv.node)))
		l, err := c.TransferLeader(ctx, inv.shard, inv.node)
		stop()
		return transferredResult(l), err
	case "split":
		stop := notifyAfter(progress, progressDelay, fmt.Sprintf("split: shard %d: waiting for its halves' leaders\n", inv.shard))
		r, err := c.SplitShard(ctx, inv.shard)
		stop()
		return splitResult(r), err
	case "remove":
		last := ^uint64(0)
		r, err := c.RemoveNode(ctx, inv.node, client.RemoveOptions{Force: inv.force, Progress: func(left uint64) {
			if left != last {
				fmt.Fprintf(progress, "remove %s: %d shards still count it\n", text(inv.node), left)
				last = left
			}
		}})
		return removedResult(r), err
	}
	return nil, usagef("unknown command %q", inv.cmd)
}

// classify maps an error to the "code" of the JSON error and the exit
// code. A node's answer keeps its protocol code name (NotFound,
// NotLeaderForTopic, …).
func classify(err error) (string, int) {
	var er *wire.ErrorResponse
	var ue *usageError
	switch {
	case errors.As(err, &ue), errors.Is(err, client.ErrInvalidArgument), errors.Is(err, client.ErrBadPosition):
		return "Usage", exitUsage
	case errors.Is(err, client.ErrWatchTooSlow):
		return "TooSlow", exitFailed
	case errors.Is(err, client.ErrCompacted):
		return "Compacted", exitFailed
	case errors.Is(err, context.DeadlineExceeded):
		return "Timeout", exitUnreachable
	case errors.As(err, &er):
		return er.Code.String(), exitFailed
	case errors.Is(err, client.ErrHandshake):
		return "Handshake", exitFailed
	case errors.Is(err, client.ErrProtocol):
		return "Protocol", exitFailed
	case errors.Is(err, client.ErrUnreachable):
		return "Unreachable", exitUnreachable
	case errors.Is(err, context.Canceled):
		return "Canceled", exitFailed
	}
	return "Internal", exitFailed
}

// progressDelay: a request answered within it shows no progress line, so
// that a refusal stays the one line on stderr.
const progressDelay = 500 * time.Millisecond

// notifyAfter writes line to w after d unless stop is called first; stop
// returns once nothing more is written.
func notifyAfter(w io.Writer, d time.Duration, line string) (stop func()) {
	cancel, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			_, _ = io.WriteString(w, line)
		case <-cancel:
		}
	}()
	return func() {
		close(cancel)
		<-finished
	}
}
