// Package enum names the values of the code's small enumerations from a
// table, in place of a switch in each type's String method, and writes a
// value the table does not name the one way: its type's name and number,
// as TopicState(9).
package enum

import "fmt"

// Integer is what an enumeration's type is made of.
type Integer interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 | ~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64
}

// Names are the names of an enumeration's values.
type Names[T Integer] struct {
	typ   string
	names map[T]string
}

// New names the values of the enumeration typ (the name a value without
// one is written with) as names says.
func New[T Integer](typ string, names map[T]string) Names[T] {
	return Names[T]{typ: typ, names: names}
}

// Name is v's name, or typ(v) for a value without one.
func (n Names[T]) Name(v T) string {
	if s, ok := n.names[v]; ok {
		return s
	}
	return fmt.Sprintf("%s(%d)", n.typ, v)
}

// Parse is the value named s; ok is false when no value is.
func (n Names[T]) Parse(s string) (v T, ok bool) {
	for v, name := range n.names {
		if name == s {
			return v, true
		}
	}
	return 0, false
}
