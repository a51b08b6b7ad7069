package main

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// The example is built and run as a program of its own.
func TestTheExampleBrokerRuns(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "broker")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "-dir", filepath.Join(t.TempDir(), "data"), "-topic", "orders", "-records", "2").CombinedOutput()
	if err != nil {
		t.Fatalf("broker: %v\n%s", err, out)
	}
	want := "acquired orders at epoch 1 with 1 partition(s)\n" +
		"acknowledged record-0 at offset 0, epoch 1\n" +
		"acknowledged record-1 at offset 1, epoch 1\n" +
		"released orders at epoch 1: leaving\n"
	if string(out) != want {
		t.Fatalf("broker printed\n%s\nwant\n%s", out, want)
	}
	if out, err := exec.Command(bin, "-records", "2").CombinedOutput(); err == nil || string(out) != "broker: -dir is required\n" {
		t.Fatalf("without -dir: %v, %q", err, out)
	}
}
