// Package ddtest runs the scenario files of the datadriven specs and reads
// their directives' arguments, for the tests of the packages that have
// such specs.
package ddtest

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// T0 is the instant the scenarios' times count from: a time written 1.5s
// is T0 plus 1.5s.
var T0 = time.Unix(1_000_000, 0)

// Handler answers one directive of a scenario with its expected output.
type Handler func(t *testing.T, td *datadriven.TestData) string

// Run runs each scenario file that glob matches (there must be one at
// least) as a subtest named after the file; fresh makes the scenario's own
// state and the handler of its directives.
func Run(t *testing.T, glob string, fresh func(t *testing.T) Handler) {
	t.Helper()
	files, err := filepath.Glob(glob)
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			h := fresh(t)
			datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
				return h(t, td)
			})
		})
	}
}

// Args are a directive's arguments, key → values (a key alone has none);
// a value that does not parse fails the test.
type Args struct {
	t *testing.T
	m map[string][]string
}

// ArgsOf reads the arguments of td.
func ArgsOf(t *testing.T, td *datadriven.TestData) Args {
	a := Args{t: t, m: map[string][]string{}}
	for _, c := range td.CmdArgs {
		a.m[c.Key] = c.Vals
	}
	return a
}

// NewArgs are the arguments m, as a test writes them.
func NewArgs(t *testing.T, m map[string][]string) Args { return Args{t: t, m: m} }

// FieldArgs reads fields written k=v (or k alone: the value "") as
// arguments; a key written again adds a value.
func FieldArgs(t *testing.T, fields []string) Args {
	a := Args{t: t, m: map[string][]string{}}
	for _, f := range fields {
		k, v, _ := strings.Cut(f, "=")
		a.m[k] = append(a.m[k], v)
	}
	return a
}

// Has reports whether key is given.
func (a Args) Has(key string) bool { _, ok := a.m[key]; return ok }

// Vals is key's values.
func (a Args) Vals(key string) []string { return a.m[key] }

// Str is key's first value, or def when it has none.
func (a Args) Str(key, def string) string {
	if v := a.m[key]; len(v) > 0 {
		return v[0]
	}
	return def
}

// Need is key's first value; the test fails when it has none.
func (a Args) Need(key string) string {
	if v := a.m[key]; len(v) > 0 {
		return v[0]
	}
	a.t.Fatalf("%s= required", key)
	return ""
}

// Num is key's first value as a number.
func (a Args) Num(key string) uint64 {
	s := a.Str(key, "")
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		a.t.Fatalf("%s=%q: %v", key, s, err)
	}
	return n
}

// NumOr is key's first value as a number, or def when it is empty or not
// given.
func (a Args) NumOr(key string, def uint64) uint64 {
	if a.Str(key, "") == "" {
		return def
	}
	return a.Num(key)
}

// Nums is key's values as numbers.
func (a Args) Nums(key string) []uint64 {
	var out []uint64
	for _, v := range a.m[key] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			a.t.Fatalf("%s=%q: %v", key, v, err)
		}
		out = append(out, n)
	}
	return out
}

// Dur is key's first value as a duration, or def when it is empty or not
// given.
func (a Args) Dur(key string, def time.Duration) time.Duration {
	s := a.Str(key, "")
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		a.t.Fatalf("%s=%q: %v", key, s, err)
	}
	return d
}

// Time is key's first value as a time; the test fails when it has none.
func (a Args) Time(key string) time.Time { return At(a.t, a.Need(key)) }

// At reads a time written as an offset from T0.
func At(t *testing.T, s string) time.Time {
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("time %q: %v", s, err)
	}
	return T0.Add(d)
}

// Lines is s's lines that are not blank, trimmed.
func Lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}
