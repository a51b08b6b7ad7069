package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/shoalmq/shoal/client"
	"github.com/shoalmq/shoal/wire"
)

// Batches of `produce TOPIC -`: a batch goes out when it holds this many
// records or bytes, or when no more input is waiting.
const (
	stdinBatchRecords = 1000
	stdinBatchBytes   = wire.MaxFrame / 2
)

// stdinBatchJSON is the --json line of one batch sent by `produce TOPIC -`.
type stdinBatchJSON struct {
	Topic   string `json:"topic"`
	Epoch   uint64 `json:"epoch"`
	Offset  uint64 `json:"offset"`  // of the batch's first record
	Records int    `json:"records"` // in the batch
}

// produceLines sends stdin's lines to inv.topic in batches and prints
// one result per batch: with --json a line each as it is acknowledged,
// else a table at the end. Each batch has the whole --timeout. A failure
// stops the command; the batches printed before it were acknowledged.
func produceLines(ctx context.Context, c *client.Client, inv *invocation, stdin io.Reader, stdout, stderr io.Writer) int {
	if stdin == nil {
		writeError(stderr, "Usage", "produce: no standard input", inv.json)
		return exitUsage
	}
	in := bufio.NewReaderSize(stdin, 64<<10)
	var (
		batch   [][]byte
		size    int
		sent    int
		results []stdinBatchJSON
	)
	send := func() error {
		if len(batch) == 0 {
			return nil
		}
		bctx, cancel := context.WithTimeoutCause(ctx, inv.timeout,
			fmt.Errorf("no answer within --timeout %v", inv.timeout))
		p, err := c.Produce(bctx, inv.topic, batch)
		cancel()
		if err != nil {
			return fmt.Errorf("after %d records acknowledged: %w", sent, err)
		}
		res := stdinBatchJSON{Topic: p.Topic, Epoch: p.Epoch, Offset: p.Offset, Records: len(batch)}
		sent += len(batch)
		batch, size = batch[:0], 0
		if inv.json {
			return writeJSON(stdout, res)
		}
		results = append(results, res)
		return nil
	}
	for line := 1; ; line++ {
		rec, err := readLine(in)
		if errors.Is(err, io.EOF) && rec == nil {
			break
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return fail(stderr, inv, usagef("produce: stdin line %d: %v", line, err))
		}
		if size+len(rec) > stdinBatchBytes {
			if err := send(); err != nil {
				return fail(stderr, inv, err)
			}
		}
		batch = append(batch, rec)
		size += wire.ProduceRecordSize(len(rec))
		// Full, or nothing more waiting: send now, so that a slow writer
		// (a person typing, a tail -f) sees each record go out.
		if len(batch) == stdinBatchRecords || in.Buffered() == 0 {
			if err := send(); err != nil {
				return fail(stderr, inv, err)
			}
		}
	}
	if err := send(); err != nil {
		return fail(stderr, inv, err)
	}
	if inv.json {
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	row(tw, "TOPIC", "EPOCH", "OFFSET", "RECORDS")
	for _, r := range results {
		row(tw, text(r.Topic), u64(r.Epoch), u64(r.Offset), u64(uint64(r.Records)))
	}
	if err := tw.Flush(); err != nil {
		writeError(stderr, "Output", err.Error(), inv.json)
		return exitFailed
	}
	return exitOK
}

// readLine reads one line without its "\n" (or "\r\n") as a new slice. At
// the end of the input it returns the last line if it had no line break,
// then nil and io.EOF. A line longer than a record may be is an error.
func readLine(in *bufio.Reader) ([]byte, error) {
	var rec []byte
	for {
		chunk, err := in.ReadSlice('\n')
		if len(rec)+len(chunk) > wire.MaxRecordLen+2 {
			return nil, fmt.Errorf("longer than a record may be (%d bytes)", wire.MaxRecordLen)
		}
		rec = append(rec, chunk...)
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(rec) == 0:
			return nil, io.EOF
		case err != nil && !errors.Is(err, io.EOF):
			return nil, err
		}
		rec = bytes.TrimSuffix(rec, []byte("\n"))
		rec = bytes.TrimSuffix(rec, []byte("\r"))
		if len(rec) > wire.MaxRecordLen {
			return nil, fmt.Errorf("longer than a record may be (%d bytes)", wire.MaxRecordLen)
		}
		if rec == nil {
			rec = []byte{}
		}
		return rec, nil
	}
}
