package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
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

// memo keeps what build made of the owners and their addresses, which
// repeat row after row (a few hundred at most are kept).
type memo[T any] struct {
	build func(string) T
	last  string
	lastV T
	done  bool
	kept  map[string]T
}

func (m *memo[T]) of(s string) T {
	if m.done && s == m.last {
		return m.lastV
	}
	v, ok := m.kept[s]
	if !ok {
		if m.kept == nil || len(m.kept) >= 256 {
			m.kept = make(map[string]T)
		}
		v = m.build(s)
		m.kept[s] = v
	}
	m.last, m.lastV, m.done = s, v, true
	return v
}

// fastText is text, without its rune-by-rune look at plain ASCII.
func fastText(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return text(s)
		}
	}
	if s == "" {
		return text(s) // shown as ""
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
	owner, addr := memo[string]{build: fastText}, memo[string]{build: fastText}
	cells := func(a *client.Assignment) (topic, o, ad string) {
		return fastText(a.Topic), owner.of(a.Owner), addr.of(a.OwnerAddr)
	}
	r.each(func(_ int, a *client.Assignment) {
		t, o, ad := cells(a)
		width[0] = max(width[0], utf8.RuneCountInString(t))
		width[1] = max(width[1], utf8.RuneCountInString(o))
		width[2] = max(width[2], utf8.RuneCountInString(ad))
		width[3] = max(width[3], decimalLen(a.Epoch))
		width[4] = max(width[4], decimalLen(uint64(a.Partitions)))
	})
	spaces := func(n int) {
		for ; n > 0; n-- {
			w.WriteByte(' ')
		}
	}
	pad := func(s string, col int) {
		w.WriteString(s)
		spaces(width[col] + 2 - utf8.RuneCountInString(s))
	}
	var num []byte
	padNum := func(v uint64, col int) {
		num = strconv.AppendUint(num[:0], v, 10)
		w.Write(num)
		spaces(width[col] + 2 - len(num))
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
		padNum(a.Epoch, 3)
		padNum(uint64(a.Partitions), 4)
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
	quote := func(s string) []byte { return appendJSONString(nil, s) }
	owner, addr := memo[[]byte]{build: quote}, memo[[]byte]{build: quote}
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
		b = append(b, owner.of(a.Owner)...)
		b = append(b, `,"owner_addr":`...)
		b = append(b, addr.of(a.OwnerAddr)...)
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

// appendJSONString appends s as writeJSON writes it: as is when it is
// printable ASCII without a quote or backslash, else through writeJSON.
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
	var buf bytes.Buffer
	if err := writeJSON(&buf, s); err != nil {
		panic(err) // a string always encodes
	}
	return append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
}
