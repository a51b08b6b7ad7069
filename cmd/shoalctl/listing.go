package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/shoalmq/shoal/client"
)

// allTopics is every topic of topics --all, page after page in shard
// order. It prints as a topicsResult of them does, byte for byte, but row
// by row into a buffer rather than through tabwriter or encoding/json's
// reflection: a listing is millions of rows.
type allTopics struct{ pages [][]client.Assignment }

// each calls fn with every topic in order.
func (r allTopics) each(fn func(i int, a *client.Assignment)) {
	i := 0
	for _, p := range r.pages {
		for j := range p {
			fn(i, &p[j])
			i++
		}
	}
}

func (r allTopics) flat() []client.Assignment { return slices.Concat(r.pages...) }

// listAll lists every topic (client.ListAll), in shard order, each
// shard's topics by name.
func listAll(ctx context.Context, c *client.Client, prefix string) (result, error) {
	var pages [][]client.Assignment
	_, err := c.ListAll(ctx, client.ListAllOptions{Prefix: prefix}, func(page []client.Assignment) error {
		pages = append(pages, page)
		return nil
	})
	return allTopics{pages: inShardOrder(pages)}, err
}

func byShard(a, b client.Assignment) int {
	return cmp.Or(cmp.Compare(a.Shard, b.Shard), strings.Compare(a.Topic, b.Topic))
}

// inShardOrder puts pages in shard order, each shard's topics by name.
// Each range of shards lists its shards in order, each shard's topics by
// name, so the pages need only be put in order of their first topic; a
// check of the whole, and a sort if it fails, make that a shortcut, not
// an assumption.
func inShardOrder(pages [][]client.Assignment) [][]client.Assignment {
	pages = slices.DeleteFunc(pages, func(p []client.Assignment) bool { return len(p) == 0 })
	slices.SortFunc(pages, func(a, b []client.Assignment) int { return byShard(a[0], b[0]) })
	sorted := true
	var prev *client.Assignment
	allTopics{pages}.each(func(_ int, a *client.Assignment) {
		if prev != nil && byShard(*prev, *a) > 0 {
			sorted = false
		}
		prev = a
	})
	if sorted {
		return pages
	}
	all := allTopics{pages}.flat()
	slices.SortFunc(all, byShard)
	return [][]client.Assignment{all}
}

func (r allTopics) jsonValue() any { return topicsResult{Topics: r.flat()}.jsonValue() }

func (r allTopics) table(w *tabwriter.Writer) { topicsResult{Topics: r.flat()}.table(w) }

// write prints r as writeResult prints topicsResult{Topics: r.topics}.
func (r allTopics) write(w io.Writer, asJSON bool) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	var err error
	if asJSON {
		err = r.writeJSON(bw)
	} else {
		err = r.writeTable(bw)
	}
	if err != nil {
		return err
	}
	return bw.Flush()
}

// cellCache keeps the cells made of owners and their addresses, which
// repeat row after row (a few hundred at most are kept).
type cellCache struct {
	last, lastCell string
	cells          map[string]string
}

func (c *cellCache) text(s string) string {
	if s == c.last && c.lastCell != "" {
		return c.lastCell
	}
	cell, ok := c.cells[s]
	if !ok {
		if c.cells == nil || len(c.cells) >= 256 {
			c.cells = make(map[string]string)
		}
		cell = fastText(s)
		c.cells[s] = cell
	}
	c.last, c.lastCell = s, cell
	return cell
}

// fastText is text, without its rune-by-rune look at plain ASCII.
func fastText(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return text(s)
		}
	}
	if s == "" {
		return text(s)
	}
	return s
}

// writeTable lays the rows out as tabwriter does with topicsResult's
// settings (no minimum width, padding 2, spaces): each cell but the last
// of a row padded to its column's widest cell, in runes, plus 2.
func (r allTopics) writeTable(w *bufio.Writer) error {
	header := [6]string{"TOPIC", "OWNER", "OWNER ADDR", "EPOCH", "PARTITIONS", "SHARD"}
	var width [5]int
	for i := range width {
		width[i] = len(header[i])
	}
	var owner, addr cellCache
	cells := func(a *client.Assignment) (topic, o, ad string) {
		return fastText(a.Topic), owner.text(a.Owner), addr.text(a.OwnerAddr)
	}
	var num []byte
	r.each(func(_ int, a *client.Assignment) {
		t, o, ad := cells(a)
		width[0] = max(width[0], utf8.RuneCountInString(t))
		width[1] = max(width[1], utf8.RuneCountInString(o))
		width[2] = max(width[2], utf8.RuneCountInString(ad))
		width[3] = max(width[3], decimalLen(a.Epoch))
		width[4] = max(width[4], decimalLen(uint64(a.Partitions)))
	})
	pad := func(s string, col int) {
		w.WriteString(s)
		for n := width[col] + 2 - utf8.RuneCountInString(s); n > 0; n-- {
			w.WriteByte(' ')
		}
	}
	for i, h := range header[:5] {
		pad(h, i)
	}
	w.WriteString(header[5])
	w.WriteByte('\n')
	var err error
	r.each(func(_ int, a *client.Assignment) {
		if err != nil {
			return
		}
		t, o, ad := cells(a)
		pad(t, 0)
		pad(o, 1)
		pad(ad, 2)
		num = strconv.AppendUint(num[:0], a.Epoch, 10)
		w.Write(num)
		for n := width[3] + 2 - len(num); n > 0; n-- {
			w.WriteByte(' ')
		}
		num = strconv.AppendUint(num[:0], uint64(a.Partitions), 10)
		w.Write(num)
		for n := width[4] + 2 - len(num); n > 0; n-- {
			w.WriteByte(' ')
		}
		num = strconv.AppendUint(num[:0], a.Shard, 10)
		w.Write(num)
		err = w.WriteByte('\n')
	})
	return err
}

func decimalLen(v uint64) int {
	n := 1
	for v >= 10 {
		v /= 10
		n++
	}
	return n
}

// writeJSON writes what writeJSON(topicsResult.jsonValue()) writes.
func (r allTopics) writeJSON(w *bufio.Writer) error {
	var b []byte
	var owner, addr jsonCache
	w.WriteString(`{"topics":[`)
	var err error
	r.each(func(i int, a *client.Assignment) {
		if err != nil {
			return
		}
		b = b[:0]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"topic":`...)
		b = appendJSONString(b, a.Topic)
		b = append(b, `,"owner":`...)
		b = append(b, owner.quote(a.Owner)...)
		b = append(b, `,"owner_addr":`...)
		b = append(b, addr.quote(a.OwnerAddr)...)
		b = append(b, `,"epoch":`...)
		b = strconv.AppendUint(b, a.Epoch, 10)
		b = append(b, `,"partitions":`...)
		b = strconv.AppendUint(b, uint64(a.Partitions), 10)
		b = append(b, `,"shard":`...)
		b = strconv.AppendUint(b, a.Shard, 10)
		b = append(b, '}')
		_, err = w.Write(b)
	})
	if err != nil {
		return err
	}
	_, err = w.WriteString("],\"next\":\"\"}\n")
	return err
}

// jsonCache is cellCache for JSON strings.
type jsonCache struct {
	last     string
	lastJSON []byte
	strings  map[string][]byte
}

func (c *jsonCache) quote(s string) []byte {
	if s == c.last && c.lastJSON != nil {
		return c.lastJSON
	}
	q, ok := c.strings[s]
	if !ok {
		if c.strings == nil || len(c.strings) >= 256 {
			c.strings = make(map[string][]byte)
		}
		q = appendJSONString(nil, s)
		c.strings[s] = q
	}
	c.last, c.lastJSON = s, q
	return q
}

// appendJSONString appends s as encoding/json writes it with HTML left
// alone: as is when it is printable ASCII without a quote or backslash,
// else through encoding/json itself.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return appendJSONSlow(b, s)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

func appendJSONSlow(b []byte, s string) []byte {
	var sb strings.Builder
	enc := json.NewEncoder(&sb)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		panic(err) // a string always encodes
	}
	return append(b, strings.TrimSuffix(sb.String(), "\n")...)
}
