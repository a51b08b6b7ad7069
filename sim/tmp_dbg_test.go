package sim

import (
	"log/slog"
	"os"
	"testing"
)

func TestTmpDbg(t *testing.T) {
	f, _ := os.Create("/tmp/dbg-n3.log")
	defer f.Close()
	lg := slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug}))
	res, err := Run(Config{Seed: 1343438483, Logger: lg})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(res.Violations)
}
