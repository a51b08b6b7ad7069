package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/shoalmq/shoal/client"
)

// The --json shapes. Field names are the documented, stable keys (docs/cli.md); changing one breaks scripts.

type assignmentJSON struct {
	Topic      string `json:"topic"`
	Owner      string `json:"owner"`
	OwnerAddr  string `json:"owner_addr"`
	Epoch      uint64 `json:"epoch"`
	Partitions uint32 `json:"partitions"`
	Shard      uint64 `json:"shard"`
}

type revokedJSON struct {
	Topic string `json:"topic"`
	Epoch uint64 `json:"epoch"`
}

type producedJSON struct {
	Topic  string `json:"topic"`
	Epoch  uint64 `json:"epoch"`
	Offset uint64 `json:"offset"`
}

// recordJSON is one fetched record. Value is the record as text when it
// is UTF-8 and no other format was asked for; otherwise it is base64, and
// Encoding says so.
type recordJSON struct {
	Offset   uint64 `json:"offset"`
	Epoch    uint64 `json:"epoch"`
	Value    string `json:"value"`
	Encoding string `json:"encoding,omitempty"` // "base64", or absent for text
}

type fetchedJSON struct {
	Topic   string       `json:"topic"`
	Epoch   uint64       `json:"epoch"`
	Records []recordJSON `json:"records"`
}

type memberJSON struct {
	ID          string `json:"id"`
	Generation  uint64 `json:"generation"`
	Incarnation uint64 `json:"incarnation"`
	State       string `json:"state"`
	Rack        string `json:"rack"`
	SwimAddr    string `json:"swim_addr"`
	ClientAddr  string `json:"client_addr"`
	PeerAddr    string `json:"peer_addr"`
}

type membersJSON struct {
	Members []memberJSON `json:"members"`
}

type shardJSON struct {
	Shard    uint64   `json:"shard"`
	Replicas []string `json:"replicas"`
	Leader   string   `json:"leader"`
	Term     uint64   `json:"term"`
	Range    string   `json:"range"`
}

type shardsJSON struct {
	Shards []shardJSON `json:"shards"`
}

type statusJSON struct {
	Node         string `json:"node"`
	Generation   uint64 `json:"generation"`
	MembersAlive uint32 `json:"members_alive"`
	ShardsHosted uint32 `json:"shards_hosted"`
	ShardsLed    uint32 `json:"shards_led"`
	TopicsOwned  uint64 `json:"topics_owned"`
	Ready        bool   `json:"ready"`
}

// changeJSON is one line of watch --json.
type changeJSON struct {
	Topic      string `json:"topic"`
	Change     string `json:"change"`
	Owner      string `json:"owner"`
	OwnerAddr  string `json:"owner_addr"`
	Epoch      uint64 `json:"epoch"`
	Partitions uint32 `json:"partitions"`
	Shard      uint64 `json:"shard"`
}

type watchSplitJSON struct {
	Change string    `json:"change"`
	Shard  uint64    `json:"shard"`
	Halves [2]uint64 `json:"halves"`
	Index  uint64    `json:"index"`
}

type topicsJSON struct {
	Topics []assignmentJSON `json:"topics"`
	Next   string           `json:"next"`
}

type drainedJSON struct {
	Node         string  `json:"node"`
	TopicsMoved  uint64  `json:"topics_moved"`
	LeadersMoved uint64  `json:"leaders_moved"`
	DurationS    float64 `json:"duration_s"`
}

type undrainedJSON struct {
	Node string `json:"node"`
}

type transferredJSON struct {
	Shard  uint64 `json:"shard"`
	Leader string `json:"leader"`
	Term   uint64 `json:"term"`
}

type splitJSON struct {
	Shard  uint64 `json:"shard"`
	Leader string `json:"leader"`
	Term   uint64 `json:"term"`
	Low    uint64 `json:"low"`
	High   uint64 `json:"high"`
}

type removedJSON struct {
	Node           string `json:"node"`
	ShardsReplaced uint64 `json:"shards_replaced"`
}

type errorJSON struct {
	Error errorBody `json:"error"`
}

type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// result is what a command printed: its JSON shape and its table.
type result interface {
	jsonValue() any
	table(w *tabwriter.Writer)
}

type assignmentResult client.Assignment

func (r assignmentResult) jsonValue() any {
	return assignmentJSON(r)
}

func (r assignmentResult) table(w *tabwriter.Writer) {
	row(w, "TOPIC", "OWNER", "OWNER ADDR", "EPOCH", "PARTITIONS", "SHARD")
	row(w, text(r.Topic), text(r.Owner), text(r.OwnerAddr), u64(r.Epoch), u64(uint64(r.Partitions)), u64(r.Shard))
}

type revokedResult client.Revoked

func (r revokedResult) jsonValue() any { return revokedJSON(r) }

func (r revokedResult) table(w *tabwriter.Writer) {
	row(w, "TOPIC", "REVOKED AT EPOCH")
	row(w, text(r.Topic), u64(r.Epoch))
}

type producedResult client.ProduceResult

func (r producedResult) jsonValue() any {
	return producedJSON(r)
}

func (r producedResult) table(w *tabwriter.Writer) {
	row(w, "TOPIC", "EPOCH", "OFFSET")
	row(w, text(r.Topic), u64(r.Epoch), u64(r.Offset))
}

type fetchedResult client.FetchResult

func (r fetchedResult) jsonValue() any { return fetchJSON(r, false) }

// fetchJSON is the --json shape of a fetch. A value that is not valid
// UTF-8 is always base64: as a JSON string it would come out with U+FFFD in
// place of its bytes.
func fetchJSON(r fetchedResult, allBase64 bool) fetchedJSON {
	out := fetchedJSON{Topic: r.Topic, Epoch: r.Epoch, Records: make([]recordJSON, len(r.Records))}
	for i, rec := range r.Records {
		if allBase64 || !utf8.Valid(rec.Value) {
			out.Records[i] = recordJSON{Offset: rec.Offset, Epoch: rec.Epoch, Value: base64.StdEncoding.EncodeToString(rec.Value), Encoding: "base64"}
			continue
		}
		out.Records[i] = recordJSON{Offset: rec.Offset, Epoch: rec.Epoch, Value: string(rec.Value)}
	}
	return out
}

func (r fetchedResult) table(w *tabwriter.Writer) {
	row(w, "OFFSET", "EPOCH", "VALUE")
	for _, rec := range r.Records {
		row(w, u64(rec.Offset), u64(rec.Epoch), text(string(rec.Value)))
	}
}

// formattedFetch is a fetch shown with --format base64 or raw.
type formattedFetch struct {
	r      fetchedResult
	format string // "base64" or "raw"
}

func (f formattedFetch) jsonValue() any { return fetchJSON(f.r, true) }

func (f formattedFetch) table(w *tabwriter.Writer) {
	row(w, "OFFSET", "EPOCH", "VALUE")
	for _, rec := range f.r.Records {
		row(w, u64(rec.Offset), u64(rec.Epoch), base64.StdEncoding.EncodeToString(rec.Value))
	}
}

// writeRaw writes each value's bytes followed by a line break.
func (f formattedFetch) writeRaw(w io.Writer) error {
	bw := bufio.NewWriter(w)
	for _, rec := range f.r.Records {
		bw.Write(rec.Value)
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

type membersResult []client.Member

func (r membersResult) jsonValue() any {
	out := membersJSON{Members: make([]memberJSON, len(r))}
	for i, m := range r {
		out.Members[i] = memberJSON{ID: m.ID, Generation: m.Generation, Incarnation: m.Incarnation, State: m.State.String(),
			Rack: m.Rack, SwimAddr: m.SwimAddr, ClientAddr: m.ClientAddr, PeerAddr: m.PeerAddr}
	}
	return out
}

func (r membersResult) table(w *tabwriter.Writer) {
	row(w, "ID", "GENERATION", "INCARNATION", "STATE", "RACK", "SWIM ADDR", "CLIENT ADDR", "PEER ADDR")
	for _, m := range r {
		row(w, text(m.ID), u64(m.Generation), u64(m.Incarnation), m.State.String(), text(m.Rack),
			text(m.SwimAddr), text(m.ClientAddr), text(m.PeerAddr))
	}
}

type shardsResult []client.ShardInfo

func (r shardsResult) jsonValue() any {
	out := shardsJSON{Shards: make([]shardJSON, len(r))}
	for i, s := range r {
		reps := s.Replicas
		if reps == nil {
			reps = []string{}
		}
		out.Shards[i] = shardJSON{Shard: s.Shard, Replicas: reps, Leader: s.Leader, Term: s.Term, Range: shardRange(s)}
	}
	return out
}

func (r shardsResult) table(w *tabwriter.Writer) {
	row(w, "SHARD", "RANGE", "LEADER", "TERM", "REPLICAS")
	for _, s := range r {
		leader := s.Leader
		if leader == "" {
			leader = "-"
		}
		reps := make([]string, len(s.Replicas))
		for i, id := range s.Replicas {
			reps[i] = text(id)
		}
		row(w, u64(s.Shard), shardRange(s), text(leader), u64(s.Term), strings.Join(reps, ","))
	}
}

// shardRange says which key hashes h a shard holds: "h%8=3" for base
// shard 3 of 8, "h%8=3 q%4=1" for the shard of its range split twice
// whose q = h/8 leaves 1 mod 4; "-" when the base is not known.
func shardRange(s client.ShardInfo) string {
	switch {
	case s.Base == 0:
		return "-"
	case s.Depth == 0:
		return fmt.Sprintf("h%%%d=%d", s.Base, s.BaseShard)
	}
	return fmt.Sprintf("h%%%d=%d q%%%d=%d", s.Base, s.BaseShard, uint64(1)<<s.Depth, s.Path)
}

type statusResult client.Status

func (r statusResult) jsonValue() any {
	return statusJSON(r)
}

func (r statusResult) table(w *tabwriter.Writer) {
	row(w, "NODE", "GENERATION", "MEMBERS ALIVE", "SHARDS HOSTED", "SHARDS LED", "TOPICS OWNED", "READY")
	row(w, text(r.Node), u64(r.Generation), u64(uint64(r.MembersAlive)), u64(uint64(r.ShardsHosted)),
		u64(uint64(r.ShardsLed)), u64(r.TopicsOwned), strconv.FormatBool(r.Ready))
}

type topicsResult client.TopicPage

func (r topicsResult) jsonValue() any {
	out := topicsJSON{Topics: make([]assignmentJSON, len(r.Topics)), Next: r.Next}
	for i, a := range r.Topics {
		out.Topics[i] = assignmentJSON(a)
	}
	return out
}

func (r topicsResult) table(w *tabwriter.Writer) {
	row(w, "TOPIC", "OWNER", "OWNER ADDR", "EPOCH", "PARTITIONS", "SHARD")
	for _, a := range r.Topics {
		row(w, text(a.Topic), text(a.Owner), text(a.OwnerAddr), u64(a.Epoch), u64(uint64(a.Partitions)), u64(a.Shard))
	}
	if r.Next != "" {
		row(w, "next page: --cursor "+r.Next)
	}
}

// watchHeader heads the table of watch: its lines are written as changes
// come, so the columns are fixed widths, not aligned on the widest.
const watchHeader = "CHANGE    TOPIC                     OWNER   OWNER ADDR             EPOCH  PARTITIONS  SHARD\n"

// writeChange prints one change of a watch: a line of JSON or of the
// table.
func writeChange(w io.Writer, ch client.Change, asJSON bool) error {
	if ch.Split != nil {
		return writeSplit(w, ch.Shard, ch.Split, asJSON)
	}
	if asJSON {
		return writeJSON(w, changeJSON{Topic: ch.Topic, Change: ch.Change.String(), Owner: ch.Owner, OwnerAddr: ch.OwnerAddr,
			Epoch: ch.Epoch, Partitions: ch.Partitions, Shard: ch.Shard})
	}
	owner, addr := text(ch.Owner), text(ch.OwnerAddr)
	if ch.Owner == "" {
		owner, addr = "-", "-"
	}
	_, err := fmt.Fprintf(w, "%-9s %-25s %-7s %-22s %-6d %-11d %d\n", ch.Change, text(ch.Topic), owner, addr, ch.Epoch, ch.Partitions, ch.Shard)
	return err
}

// writeSplit prints a split of a watch (--splits): a line of JSON, or of
// the table with the halves in the SHARD column.
func writeSplit(w io.Writer, shard uint64, sp *client.Split, asJSON bool) error {
	if asJSON {
		return writeJSON(w, watchSplitJSON{Change: "split", Shard: shard, Halves: [2]uint64{sp.Low, sp.High}, Index: sp.Index})
	}
	_, err := fmt.Fprintf(w, "%-9s %-25s %-7s %-22s %-6s %-11s %d -> %d %d\n", "split", "-", "-", "-", "-", "-", shard, sp.Low, sp.High)
	return err
}

type drainedResult client.DrainResult

func (r drainedResult) jsonValue() any {
	return drainedJSON{Node: r.Node, TopicsMoved: r.TopicsMoved, LeadersMoved: r.LeadersMoved,
		DurationS: math.Round(r.Duration.Seconds()*1000) / 1000}
}

func (r drainedResult) table(w *tabwriter.Writer) {
	row(w, "NODE", "TOPICS MOVED", "LEADERS MOVED", "DURATION")
	row(w, text(r.Node), u64(r.TopicsMoved), u64(r.LeadersMoved), r.Duration.Round(time.Millisecond).String())
}

type undrainedResult client.DrainProgress

func (r undrainedResult) jsonValue() any { return undrainedJSON{Node: r.Node} }

func (r undrainedResult) table(w *tabwriter.Writer) {
	row(w, "NODE", "UNDRAINED")
	row(w, text(r.Node), "true")
}

type transferredResult client.LeaderTransfer

func (r transferredResult) jsonValue() any { return transferredJSON(r) }

func (r transferredResult) table(w *tabwriter.Writer) {
	row(w, "SHARD", "LEADER", "TERM")
	row(w, u64(r.Shard), text(r.Leader), u64(r.Term))
}

type splitResult client.SplitResult

func (r splitResult) jsonValue() any { return splitJSON(r) }

func (r splitResult) table(w *tabwriter.Writer) {
	row(w, "SHARD", "LEADER", "TERM", "HALVES")
	row(w, u64(r.Shard), text(r.Leader), u64(r.Term), u64(r.Low)+","+u64(r.High))
}

type removedResult client.RemoveResult

func (r removedResult) jsonValue() any {
	return removedJSON{Node: r.Node, ShardsReplaced: r.ShardsReplaced}
}

func (r removedResult) table(w *tabwriter.Writer) {
	row(w, "NODE", "SHARDS REPLACED")
	row(w, text(r.Node), u64(r.ShardsReplaced))
}

// writeResult prints r as one line of JSON or as a table.
func writeResult(w io.Writer, r result, asJSON bool) error {
	if f, ok := r.(formattedFetch); ok && f.format == "raw" {
		return f.writeRaw(w)
	}
	if a, ok := r.(allTopics); ok {
		return a.write(w, asJSON)
	}
	if asJSON {
		return writeJSON(w, r.jsonValue())
	}
	// tabwriter writes cell by cell: a listing of every topic would be
	// millions of writes without a buffer.
	bw := bufio.NewWriterSize(w, 64<<10)
	tw := tabwriter.NewWriter(bw, 0, 4, 2, ' ', 0)
	r.table(tw)
	if err := tw.Flush(); err != nil {
		return err
	}
	return bw.Flush()
}

// writeJSON writes v as one line. HTML characters are left alone: the
// output is read by programs and people, not embedded in pages.
func writeJSON(w io.Writer, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// writeError prints one line: "shoalctl: message", or the JSON error
// object.
func writeError(w io.Writer, code, message string, asJSON bool) {
	// The client's errors start with its package name, which says
	// nothing to a user of the command.
	message = oneLine(strings.TrimPrefix(message, "client: "))
	if asJSON {
		_ = writeJSON(w, errorJSON{Error: errorBody{Code: code, Message: message}})
		return
	}
	fmt.Fprintf(w, "shoalctl: %s\n", message)
}

func row(w io.Writer, cells ...string) {
	io.WriteString(w, strings.Join(cells, "\t")+"\n")
}

func u64(v uint64) string { return strconv.FormatUint(v, 10) }

// text shows a value in a table cell: as is when it is printable UTF-8
// without tabs or line breaks, else Go-quoted, so one record stays one row
// and control bytes never reach the terminal. An empty value is "".
func text(s string) string {
	if s == "" {
		return `""`
	}
	if utf8.ValidString(s) && strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) < 0 {
		return s
	}
	return strconv.Quote(s)
}

// oneLine keeps an error message on a single line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
