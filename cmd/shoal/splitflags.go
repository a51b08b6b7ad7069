package main

import (
	"errors"
	"flag"
	"strconv"
	"time"

	"github.com/shoalmq/shoal/node"
	"github.com/shoalmq/shoal/node/reconcile"
)

// splitOptions are the automatic-split flags of `shoal node` and `shoal
// dev`: any of them set turns automatic splits on, each trigger not set
// keeping its default (node.DefaultSplits); none set leaves the node's
// default, automatic unless --shards is given.
type splitOptions struct {
	topics, mib, perMember, maxShards int
	rate                              float64
	window                            time.Duration
	// cfg is what settle made of the flags: nil for the node's default.
	cfg *reconcile.SplitConfig
}

// splitFlags are the flags splitOptions declares.
var splitFlags = []string{"split-topics", "split-mib", "split-rate", "split-window", "shards-per-member", "max-shards"}

func (s *splitOptions) declare(fs *flag.FlagSet) {
	nonNegative := func(name string, dst *int) {
		fs.Func(name, "", func(v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return errors.New("want a whole number, 0 or more")
			}
			*dst = n
			return nil
		})
	}
	nonNegative("split-topics", &s.topics)
	nonNegative("split-mib", &s.mib)
	nonNegative("shards-per-member", &s.perMember)
	nonNegative("max-shards", &s.maxShards)
	fs.Func("split-rate", "", func(v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f >= 0 && f < 1e12) {
			return errors.New("want a number of commands a second, 0 or more")
		}
		s.rate = f
		return nil
	})
	fs.Func("split-window", "", func(v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return errors.New("want a positive duration such as 10s")
		}
		s.window = d
		return nil
	})
}

// settle builds cfg from the flags set (by name), over the defaults of
// the preset.
func (s *splitOptions) settle(set map[string]bool, fast bool) error {
	given := false
	for _, name := range splitFlags {
		given = given || set[name]
	}
	if !given {
		return nil
	}
	sc := node.DefaultSplits(fast)
	if set["split-topics"] {
		sc.Topics = s.topics
	}
	if set["split-mib"] {
		if s.mib > 1<<20 {
			return usagef("--split-mib %d: at most %d (a TiB)", s.mib, 1<<20)
		}
		sc.Bytes = int64(s.mib) << 20
	}
	if set["split-rate"] {
		sc.Rate = s.rate
	}
	if set["split-window"] {
		sc.Window = s.window
	}
	if set["shards-per-member"] {
		sc.PerMember = s.perMember
	}
	if set["max-shards"] {
		sc.MaxShards = s.maxShards
	}
	if err := sc.Validate(); err != nil {
		return usagef("%v", err)
	}
	s.cfg = &sc
	return nil
}
