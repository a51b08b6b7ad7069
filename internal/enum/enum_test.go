package enum

import "testing"

type color uint8

const (
	red color = iota + 1
	green
)

var colors = New("color", map[color]string{red: "red", green: "green"})

// String is what a type with a name table writes; %d within Name must
// print the number, not call String again.
func (c color) String() string { return colors.Name(c) }

func TestNames(t *testing.T) {
	for _, tt := range []struct {
		c    color
		want string
	}{{red, "red"}, {green, "green"}, {0, "color(0)"}, {9, "color(9)"}} {
		if got := tt.c.String(); got != tt.want {
			t.Errorf("%d: %q, want %q", uint8(tt.c), got, tt.want)
		}
	}
	if c, ok := colors.Parse("green"); !ok || c != green {
		t.Errorf("Parse(green) = %v, %v", c, ok)
	}
	if c, ok := colors.Parse("blue"); ok {
		t.Errorf("Parse(blue) = %v, true", c)
	}
}
