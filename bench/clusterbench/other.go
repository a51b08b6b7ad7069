//go:build !linux

// Command clusterbench measures a cluster of real `shoal node` processes;
// it runs on Linux only (it reads /proc and makes network namespaces).
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "clusterbench runs on Linux only")
	os.Exit(2)
}
