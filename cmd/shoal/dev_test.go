package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// shoal dev --dir makes the directory with its parents when missing (the
// nodes' logs are opened in it before any node makes its own directory),
// and says which path it could not make.
func TestDevDirIsMade(t *testing.T) {
	want := filepath.Join(t.TempDir(), "new", "cluster")
	dir, temporary, err := devDir(want)
	if err != nil || dir != want || temporary {
		t.Fatalf("devDir = %q, %v, %v", dir, temporary, err)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("not made: %v", err)
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := devDir(filepath.Join(file, "sub")); err == nil || !strings.HasPrefix(err.Error(), "--dir: ") {
		t.Fatalf("devDir under a file: %v", err)
	}
	dir, temporary, err = devDir("")
	if err != nil || !temporary {
		t.Fatalf("devDir(\"\") = %q, %v, %v", dir, temporary, err)
	}
	_ = os.RemoveAll(dir)
}
