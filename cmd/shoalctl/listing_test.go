package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/shoalmq/shoal/client"
)

// someTopics makes n assignments over 5 owners and 64 shards, in shard
// order, with a few names that are not plain ASCII.
func someTopics(n int, rng *rand.Rand) []client.Assignment {
	odd := []string{"", "tab\there", "quote\"and\\slash", "é-ü", "日本語", "<html>&", "bad\xffutf8", "line\nbreak", "\u2028", "nul\x00", "\x7f"}
	out := make([]client.Assignment, n)
	for i := range out {
		topic := fmt.Sprintf("topic-%d-%d", rng.IntN(n*10), i)
		if rng.IntN(20) == 0 {
			topic = odd[rng.IntN(len(odd))] + topic
		}
		owner := fmt.Sprintf("n%d", rng.IntN(5))
		addr := "127.0.0.1:1700" + owner[1:]
		if rng.IntN(50) == 0 {
			owner, addr = odd[rng.IntN(len(odd))], odd[rng.IntN(len(odd))]
		}
		out[i] = client.Assignment{Topic: topic, Owner: owner, OwnerAddr: addr, Epoch: rng.Uint64N(1 << uint(rng.IntN(64))),
			Partitions: rng.Uint32N(1 << uint(rng.IntN(32))), Shard: rng.Uint64N(64)}
	}
	slices.SortFunc(out, func(a, b client.Assignment) int {
		if a.Shard != b.Shard {
			return int(a.Shard) - int(b.Shard)
		}
		return strings.Compare(a.Topic, b.Topic)
	})
	return out
}

// A listing of every topic prints byte for byte as a page of them does.
func TestAllTopicsPrintAsAPage(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 7, 3000} {
		topics := someTopics(n, rng)
		for _, asJSON := range []bool{false, true} {
			var want, got bytes.Buffer
			if err := writeResult(&want, topicsResult{Topics: topics}, asJSON); err != nil {
				t.Fatal(err)
			}
			if err := writeResult(&got, allTopics{pages: [][]client.Assignment{topics}}, asJSON); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(want.Bytes(), got.Bytes()) {
				w, g := strings.Split(want.String(), "\n"), strings.Split(got.String(), "\n")
				for i := range min(len(w), len(g)) {
					if w[i] != g[i] {
						t.Fatalf("%d topics, json %v: line %d\nwant %q\ngot  %q", n, asJSON, i, w[i], g[i])
					}
				}
				t.Fatalf("%d topics, json %v: %d lines, want %d", n, asJSON, len(g), len(w))
			}
		}
	}
}

func TestInShardOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	want := someTopics(5000, rng)
	// Four ranges of 16 shards, pages of at most 100 topics, the pages
	// of the ranges interleaved as ListAll hands them over.
	var ranges [4][][]client.Assignment
	for i := 0; i < len(want); {
		r := want[i].Shard / 16
		j := i + 1
		for j < len(want) && j-i < 100 && want[j].Shard/16 == r {
			j++
		}
		ranges[r] = append(ranges[r], want[i:j])
		i = j
	}
	var pages [][]client.Assignment
	for len(ranges[0])+len(ranges[1])+len(ranges[2])+len(ranges[3]) > 0 {
		r := rng.IntN(4)
		if len(ranges[r]) > 0 {
			pages = append(pages, ranges[r][0])
			ranges[r] = ranges[r][1:]
		}
	}
	if got := (allTopics{inShardOrder(pages)}).flat(); !slices.Equal(got, want) {
		t.Fatal("interleaved pages not put back in order")
	}
	// Pages out of order within a shard are sorted all the same.
	shuffled := slices.Clone(want)
	rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	pages = nil
	for i := 0; i < len(shuffled); i += 100 {
		pages = append(pages, shuffled[i:min(i+100, len(shuffled))])
	}
	if got := (allTopics{inShardOrder(pages)}).flat(); !slices.Equal(got, want) {
		t.Fatal("shuffled pages not sorted")
	}
}

// BenchmarkListingOutput prints a listing of 1,000,000 topics as a page
// (tabwriter, encoding/json) and as every topic (row by row).
func BenchmarkListingOutput(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	topics := make([]client.Assignment, 1_000_000)
	for i := range topics {
		owner := fmt.Sprintf("n%d", rng.IntN(3)+1)
		topics[i] = client.Assignment{Topic: fmt.Sprintf("bench-%08d", rng.IntN(1e8)), Owner: owner,
			OwnerAddr: "127.0.0.1:1700" + owner[1:], Epoch: rng.Uint64N(10) + 1, Partitions: 1, Shard: rng.Uint64N(256)}
	}
	for _, asJSON := range []bool{false, true} {
		format := map[bool]string{false: "table", true: "json"}[asJSON]
		for _, v := range []struct {
			name string
			r    result
		}{{"page", topicsResult{Topics: topics}}, {"all", allTopics{pages: [][]client.Assignment{topics}}}} {
			b.Run(format+"/"+v.name, func(b *testing.B) {
				for b.Loop() {
					if err := writeResult(discard{}, v.r, asJSON); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(topics))*float64(b.N)/b.Elapsed().Seconds(), "topics/s")
			})
		}
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
