//go:build invariants || race

package meta

import (
	"errors"
	"testing"

	"github.com/shoalmq/shoal/internal/invariants/invariantstest"
)

// stateWith returns a shard with an epoch floor of 1, holding a and b on
// n1, d on n2, and c revoked, with a session that wrote once.
func stateWith(t *testing.T) *State {
	t.Helper()
	s := New()
	s.floor = 1
	mustApply(t, s, assign("a", "n1", 2))
	mustApply(t, s, assign("b", "n1", 0))
	mustApply(t, s, assign("c", "n2", 0))
	mustApply(t, s, revoke("c"))
	w := assign("d", "n2", 0)
	w.Session, w.Clock = SessionRef{ID: 7, Seq: 1}, 10
	mustApply(t, s, w)
	return s
}

// The whole-state checks, which Apply runs every so often (on every apply
// of a state this small), catch a state broken behind Apply's back.
func TestApplyChecksTheWholeState(t *testing.T) {
	for _, tt := range []struct {
		name, want string
		breakIt    func(s *State)
	}{
		{"owner digest", `digest of "n1"`, func(s *State) { s.owners["n1"].digest ^= 1 }},
		{"active count", "active records, count says", func(s *State) { s.active++ }},
		{"owner index", `owner "n1" has 2 topics, index disagrees`, func(s *State) { s.owners["n1"].topics-- }},
		{"key index", "keys for", func(s *State) { s.order = s.order[:1] }},
		{"active without owner", `active "a" has owner ""`, func(s *State) { s.topics["a"].owner = "" }},
		{"tombstone with owner", `revoked "c" keeps owner "n2"`, func(s *State) { s.topics["c"].owner = "n2" }},
		{"session answers", "out of order", func(s *State) {
			ss := s.sessions[7]
			ss.answers = append(ss.answers, ss.answers[0])
		}},
		{"session after the clock", "after the clock", func(s *State) { s.sessions[7].last = s.clock + 1 }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := stateWith(t)
			tt.breakIt(s)
			invariantstest.MustViolate(t, tt.want, func() { _ = s.Apply(ptr(marker(1)), nil) })
		})
	}
}

// An apply that went wrong: the checks after an Apply compare the state
// with what it was before. Each case applies a command, then breaks the
// state or the result as a faulty apply would have, then runs the checks.
func TestApplyChecksWhatTheCommandDid(t *testing.T) {
	for _, tt := range []struct {
		name, want string
		cmd        Command
		breakIt    func(s *State, res *Result) error
	}{
		{"floor back", "epoch floor went back from 1 to 0", marker(1), func(s *State, _ *Result) error {
			s.floor--
			return nil
		}},
		{"clock back", "clock went back", marker(1), func(s *State, _ *Result) error {
			s.clock--
			return nil
		}},
		{"epoch back", `"a" went back from epoch 2 to 0`, assign("a", "n1", 0), func(s *State, _ *Result) error {
			s.topics["a"].epoch = 0
			return nil
		}},
		{"record lost", `"c" lost its record`, revoke("c"), func(s *State, _ *Result) error {
			delete(s.topics, "c")
			return nil
		}},
		{"failed yet changed", `"a" changed by a command that changed nothing`, update("a", 1), func(s *State, _ *Result) error {
			setEpoch(s, "a", 9)
			return ErrBadPartitions
		}},
		{"failed yet reports changes", "reports changes", revoke("zz"), func(_ *State, res *Result) error {
			res.Changed = true
			return ErrUnknownTopic
		}},
		{"changed without changes", "changed is true with 0 changes", assign("a", "n2", 0), func(_ *State, res *Result) error {
			res.Changes = res.Changes[:0]
			return nil
		}},
		{"change of a topic not named", `change of "b"`, assign("a", "n2", 0), func(_ *State, res *Result) error {
			res.Changes[0].Topic = "b"
			return nil
		}},
		{"change unlike its record", "does not describe its record", assign("a", "n2", 0), func(_ *State, res *Result) error {
			res.Changes[0].Epoch++
			return nil
		}},
		{"active count off", "active count 3→5, the changes give +1", assign("e", "n1", 0), func(s *State, _ *Result) error {
			s.active++
			return nil
		}},
		{"open to the wrong node", "open {", assign("a", "n2", 0), func(_ *State, res *Result) error {
			res.Effects[1].Node = "n3"
			return nil
		}},
		{"close to the new owner", "close {", assign("a", "n2", 0), func(_ *State, res *Result) error {
			res.Effects[0].Node = "n2"
			return nil
		}},
		{"session lost", "session 9 applied a write and is gone", func() Command {
			c := assign("a", "", 0)
			c.Session, c.Clock = SessionRef{ID: 9, Seq: 1}, 20
			return c
		}(), func(s *State, _ *Result) error {
			delete(s.sessions, 9)
			return nil
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := stateWith(t)
			c := tt.cmd
			res := &Result{}
			// A faulty apply is this Apply followed by breakIt; ck checks
			// it as Apply checks itself.
			var ck applyCheck
			ck.before(s, &c)
			err := s.Apply(&c, res)
			if berr := tt.breakIt(s, res); berr != nil {
				err = berr
			}
			invariantstest.MustViolate(t, tt.want, func() { ck.after(s, &c, res, err) })
		})
	}
}

// What the checks find unbroken they leave be: a long run of every kind of
// command, refusals and replays included, passes them.
func TestApplyChecksPassACorrectRun(t *testing.T) {
	s := New()
	owners := []string{"n1", "n2", "n3"}
	for i := range 2000 {
		topic := string(rune('a' + i%7))
		var c Command
		switch i % 6 {
		case 0:
			c = assign(topic, owners[i%3], 0)
		case 1:
			c = revoke(topic)
		case 2:
			c = update(topic, uint32(1+i%5))
		case 3:
			c = reassign(owners[i%3], "a", owners[(i+1)%3], "b", owners[(i+2)%3])
		case 4:
			c = compactCmd()
		case 5:
			c = assign(topic, owners[(i+1)%3], 0)
			c.Session, c.Clock = SessionRef{ID: uint64(1 + i%4), Seq: uint64(1 + i/20), Floor: uint64(i / 40)}, uint64(i)
		}
		if err := s.Apply(&c, nil); err != nil && errors.Is(err, ErrBadCommand) {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	if err := s.checkInvariants(); err != nil {
		t.Fatal(err)
	}
}
