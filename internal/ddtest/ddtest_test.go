package ddtest

import (
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

func TestArgs(t *testing.T) {
	td := &datadriven.TestData{CmdArgs: []datadriven.CmdArg{
		{Key: "shard", Vals: []string{"7"}},
		{Key: "in", Vals: []string{"1", "2", "3"}},
		{Key: "at", Vals: []string{"1.5s"}},
		{Key: "fresh"},
	}}
	a := ArgsOf(t, td)
	if a.Num("shard") != 7 || a.NumOr("term", 4) != 4 || !slices.Equal(a.Nums("in"), []uint64{1, 2, 3}) {
		t.Fatalf("numbers: %d %d %v", a.Num("shard"), a.NumOr("term", 4), a.Nums("in"))
	}
	if !a.Has("fresh") || a.Has("stale") || a.Str("fresh", "x") != "x" || a.Need("shard") != "7" {
		t.Fatal("keys")
	}
	if a.Time("at") != T0.Add(1500*time.Millisecond) || a.Dur("wait", time.Second) != time.Second {
		t.Fatalf("times: %v %v", a.Time("at"), a.Dur("wait", time.Second))
	}
	f := FieldArgs(t, []string{"owner=n2", "fresh", "leaders=1:a", "leaders=2:b"})
	if f.Str("owner", "") != "n2" || !f.Has("fresh") || !slices.Equal(f.Vals("leaders"), []string{"1:a", "2:b"}) {
		t.Fatalf("fields: %v", f.m)
	}
}

func TestLines(t *testing.T) {
	if got := Lines("  a b \n\n\tc\n"); !slices.Equal(got, []string{"a b", "c"}) {
		t.Fatalf("%q", got)
	}
}
