//go:build linux

package main

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(vs ...int) []time.Duration {
		var out []time.Duration
		for _, v := range vs {
			out = append(out, time.Duration(v)*time.Millisecond)
		}
		return out
	}
	cases := []struct {
		xs   []time.Duration
		p    float64
		want time.Duration
	}{
		{nil, 50, 0},
		{ms(7), 50, 7 * time.Millisecond},
		{ms(7), 100, 7 * time.Millisecond},
		{ms(4, 1, 3, 2), 50, 2 * time.Millisecond}, // nearest rank: ceil(0.5*4) = 2nd
		{ms(4, 1, 3, 2), 100, 4 * time.Millisecond},
		{ms(5, 1, 4, 2, 3), 50, 3 * time.Millisecond},
		{ms(5, 1, 4, 2, 3), 1, 1 * time.Millisecond},
		{ms(10, 20, 30, 40, 50, 60, 70, 80, 90, 100), 90, 90 * time.Millisecond},
		{ms(10, 20, 30, 40, 50, 60, 70, 80, 90, 100), 91, 100 * time.Millisecond},
	}
	for _, c := range cases {
		in := append([]time.Duration(nil), c.xs...)
		if got := percentile(c.xs, c.p); got != c.want {
			t.Errorf("percentile(%v, %v) = %v, want %v", c.xs, c.p, got, c.want)
		}
		for i := range in {
			if in[i] != c.xs[i] {
				t.Fatalf("percentile changed its input: %v", c.xs)
			}
		}
	}
}

func TestFirstAbove(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	acks := []ack{{end: at(-10), epoch: 1}, {end: at(1500), epoch: 2}, {end: at(1400), epoch: 3}, {end: at(2000), epoch: 2}}
	if got, ok := firstAbove(acks, 1); !ok || !got.Equal(at(1400)) {
		t.Fatalf("firstAbove(1) = %v %v, want +1400ms", got.Sub(t0), ok)
	}
	if got, ok := firstAbove(acks, 2); !ok || !got.Equal(at(1400)) {
		t.Fatalf("firstAbove(2) = %v %v, want +1400ms", got.Sub(t0), ok)
	}
	if _, ok := firstAbove(acks, 3); ok {
		t.Fatal("firstAbove(3) found one")
	}
	if _, ok := firstAbove(nil, 0); ok {
		t.Fatal("firstAbove(nil) found one")
	}
}

func TestLongestGap(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ms := func(v int) time.Duration { return time.Duration(v) * time.Millisecond }
	cases := []struct {
		name string
		acks []ack
		stop time.Time
		want time.Duration
	}{
		{"the gap around the fault",
			[]ack{{end: at(-300), epoch: 1}, {end: at(-200), epoch: 1}, {end: at(-20), epoch: 1}, {end: at(1480), epoch: 2}, {end: at(1500), epoch: 2}, {end: at(1520), epoch: 2}}, at(1530), ms(1500)},
		{"unordered acks",
			[]ack{{end: at(1520), epoch: 2}, {end: at(-20), epoch: 1}, {end: at(1480), epoch: 2}, {end: at(-300), epoch: 1}}, at(1530), ms(1500)},
		{"a longer gap after the failover counts",
			[]ack{{end: at(-20), epoch: 1}, {end: at(500), epoch: 2}, {end: at(3500), epoch: 2}, {end: at(3510), epoch: 2}}, at(3520), ms(3000)},
		{"gaps before the fault do not count",
			[]ack{{end: at(-5000), epoch: 1}, {end: at(-10), epoch: 1}, {end: at(90), epoch: 1}, {end: at(100), epoch: 1}}, at(110), ms(100)},
		{"never written again: until the stop",
			[]ack{{end: at(-10), epoch: 1}}, at(8000), ms(8010)},
		{"an ack exactly at t0 is before it",
			[]ack{{end: at(0), epoch: 1}, {end: at(700), epoch: 2}}, at(710), ms(700)},
		{"no ack before the fault: from t0",
			[]ack{{end: at(400), epoch: 2}, {end: at(410), epoch: 2}}, at(420), ms(400)},
		{"acks after the stop are left out",
			[]ack{{end: at(-10), epoch: 1}, {end: at(100), epoch: 2}, {end: at(5000), epoch: 2}}, at(200), ms(110)},
		{"nothing at all", nil, at(900), ms(900)},
	}
	for _, c := range cases {
		if got := longestGap(c.acks, t0, c.stop); got != c.want {
			t.Errorf("%s: longestGap = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestFirstStartedAfter(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	acks := []ack{
		{start: at(-30), end: at(20), epoch: 1},   // sent before, answered after
		{start: at(900), end: at(1300), epoch: 2}, // the first sent after
		{start: at(1000), end: at(1100), epoch: 2},
		{start: at(1400), end: at(1410), epoch: 2},
	}
	if got, ok := firstStartedAfter(acks, t0); !ok || !got.Equal(at(1100)) {
		t.Fatalf("firstStartedAfter = %v %v, want +1100ms", got.Sub(t0), ok)
	}
	if _, ok := firstStartedAfter(acks[:1], t0); ok {
		t.Fatal("an ack sent before the fault counted")
	}
	if _, ok := firstStartedAfter(nil, t0); ok {
		t.Fatal("firstStartedAfter(nil) found one")
	}
}
