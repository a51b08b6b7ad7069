package security

import (
	"testing"

	"github.com/shoalmq/shoal/wire"
)

func TestLimitsTakeTheirDefaults(t *testing.T) {
	var l Limits
	if err := l.Fill(); err != nil {
		t.Fatal(err)
	}
	if want := (Limits{MaxRequestBytes: DefaultMaxRequestBytes, MaxFetchBytes: DefaultMaxFetchBytes,
		ChangeLogLen: DefaultChangeLogLen, MaxWatchers: DefaultMaxWatchers}); l != want {
		t.Fatalf("filled %+v, want %+v", l, want)
	}
	l = Limits{MaxRequestBytes: MinRequestBytes, MaxFetchBytes: MaxFetchBytesLimit, ChangeLogLen: MaxChangeLogLen, MaxWatchers: 1}
	was := l
	if err := l.Fill(); err != nil || l != was {
		t.Fatalf("limits at their bounds: %+v, %v", l, err)
	}
}

func TestLimitsOutOfBoundsAreRefused(t *testing.T) {
	for name, l := range map[string]Limits{
		"tiny request budget": {MaxRequestBytes: 1 << 20},
		"huge fetch cap":      {MaxFetchBytes: wire.MaxFrame},
		"negative fetch cap":  {MaxFetchBytes: -1},
		"long change log":     {ChangeLogLen: MaxChangeLogLen + 1},
		"negative change log": {ChangeLogLen: -1},
		"negative watchers":   {MaxWatchers: -1},
	} {
		if err := l.Fill(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
