package proccluster

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// Metrics are the values of one scrape, by metric name: the sum over every
// series (label set) of the name, so a family split by a label reads as its
// total. A node's series all carry node="ID", one per metric.
type Metrics map[string]float64

// Value is the metric's value, 0 if the scrape had none.
func (m Metrics) Value(name string) float64 { return m[name] }

// ParseMetrics reads Prometheus text exposition: comment lines are
// skipped; every other line is `name value`, `name{labels} value` or
// either with a timestamp after the value.
func ParseMetrics(body []byte) (Metrics, error) {
	m := make(Metrics)
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest := line, ""
		if i := strings.IndexAny(line, "{ \t"); i >= 0 {
			name, rest = line[:i], line[i:]
		}
		if strings.HasPrefix(rest, "{") {
			end := labelsEnd(rest)
			if end < 0 {
				return nil, fmt.Errorf("proccluster: metrics line %d: unterminated labels", n)
			}
			rest = rest[end+1:]
		}
		f := strings.Fields(rest)
		if name == "" || len(f) < 1 || len(f) > 2 {
			return nil, fmt.Errorf("proccluster: metrics line %d: %q", n, clip(line))
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return nil, fmt.Errorf("proccluster: metrics line %d: value %q", n, clip(f[0]))
		}
		m[name] += v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("proccluster: metrics: %w", err)
	}
	return m, nil
}

// labelsEnd is the index of the '}' closing the label set s starts with,
// skipping quoted values (which may hold '}' and escaped quotes); -1 if
// there is none.
func labelsEnd(s string) int {
	quoted := false
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case !quoted && c == '}':
			return i
		}
	}
	return -1
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
