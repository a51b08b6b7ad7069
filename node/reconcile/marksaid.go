package reconcile

import (
	"log/slog"

	"github.com/shoalmq/shoal/swim"
)

// MarksEnv is where this node's marks are said once they change.
type MarksEnv interface {
	// SetMeta puts this node's marks (Marks.Meta) in its SWIM record.
	SetMeta(meta []byte) error
	// Changed has the view rebuilt with the marks although SWIM's
	// members did not change.
	Changed()
}

// Say binds the marks to where they are said (Drain, Remove, Apply) and
// to the log that tells of their changes. Call it before any of those.
func (m *Marks) Say(env MarksEnv, log *slog.Logger) {
	m.env, m.log = env, log
}

// publish says this node's marks through SWIM and has the view rebuilt
// with them.
func (m *Marks) publish() {
	if err := m.env.SetMeta(m.Meta()); err != nil {
		m.log.Error("node: publish marks", "err", err)
	}
	m.env.Changed()
}

// Drain records and spreads this node's drain mark.
func (m *Marks) Drain(drained bool) error {
	changed, err := m.SetDrained(drained)
	return m.spread(changed, err, "drain mark", "drained", drained)
}

// Remove records that node was removed at (unix ns), unless a later
// removal of it is already known, and spreads it.
func (m *Marks) Remove(node string, at uint64) error {
	added, err := m.AddRemovals(map[string]uint64{node: at})
	return m.spread(added, err, "member removed", "member", node)
}

// spread logs and publishes a change of the marks once it was made
// (changed, and err nil).
func (m *Marks) spread(changed bool, err error, msg string, args ...any) error {
	if err != nil {
		return err
	}
	if changed {
		m.log.Info(msg, args...)
		m.publish()
	}
	return nil
}

// Apply merges the removals the members name into this node's (said in
// its SWIM record when new), and returns the drained members and the
// removed ones (this node included if it was removed) as the view should
// see them (ReadMarks, Judge). The event loop's only.
func (m *Marks) Apply(ms []swim.Member) (drained, removed map[string]bool) {
	heard := ReadMarks(ms)
	for _, u := range heard.Unreadable {
		m.log.Debug("node: member metadata", "member", u.Member, "err", u.Err)
	}
	if added, err := m.AddRemovals(heard.Removals); err != nil {
		m.log.Error("node: removals", "err", err)
	} else if added {
		if err := m.env.SetMeta(m.Meta()); err != nil {
			m.log.Error("node: publish marks", "err", err)
		}
	}
	drained, removed, out := m.Judge(ms, heard)
	if out {
		m.log.Error("this node was removed from the cluster: it serves nothing; start it on an empty data directory to join as a new node")
	}
	return drained, removed
}
