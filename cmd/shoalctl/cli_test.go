package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/shoalmq/shoal/internal/version"
)

// shoalctlIn is shoalctl with stdin.
func shoalctlIn(t *testing.T, stdin []byte, servers []string, args ...string) outcome {
	t.Helper()
	cmd := exec.Command(shoalctlBinary(t), args...)
	cmd.Env = append(os.Environ(), "SHOAL_SERVERS="+strings.Join(servers, ","), "SHOAL_CLUSTER_ID=7", "SHOAL_SECRET=",
		"SHOAL_TOKEN=", "SHOAL_TLS_CA=", "SHOAL_TLS_CERT=", "SHOAL_TLS_KEY=")
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return outcome{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// TestCommandHelp: every command has a usage that starts with its own
// name and names each of its flags.
func TestCommandHelp(t *testing.T) {
	for name, spec := range commands {
		h, ok := commandHelp[name]
		if !ok {
			t.Errorf("%s: no help", name)
			continue
		}
		if !strings.HasPrefix(h, "usage: shoalctl "+name) {
			t.Errorf("%s: help starts %q", name, h[:min(len(h), 40)])
		}
		for f := range spec.flags {
			if !strings.Contains(h, "--"+f+" ") {
				t.Errorf("%s: help does not name --%s", name, f)
			}
		}
		if !strings.Contains(usage, "\n  "+name+" ") {
			t.Errorf("the usage does not list %s", name)
		}
	}
	for name := range commandHelp {
		if _, ok := commands[name]; !ok {
			t.Errorf("help for %s, which is no command", name)
		}
	}
}

func TestShoalctlHelpAndVersion(t *testing.T) {
	for _, args := range [][]string{{"help", "fetch"}, {"fetch", "--help"}, {"--help", "fetch"}, {"fetch", "t", "-h"}} {
		o := shoalctl(t, nil, args...)
		if o.code != exitOK || o.stdout != commandHelp["fetch"] || o.stderr != "" {
			t.Fatalf("%q: exit %d, stdout %q, stderr %q", args, o.code, o.stdout, o.stderr)
		}
	}
	if o := shoalctl(t, nil, "help"); o.code != exitOK || o.stdout != usage {
		t.Fatalf("help: exit %d, stdout %q", o.code, o.stdout)
	}
	shoalctl(t, nil, "help", "frobnicate").failsWith(t, exitUsage, `help: unknown command "frobnicate"`)
	shoalctl(t, nil, "help", "fetch", "lookup").failsWith(t, exitUsage, `help: unexpected argument "lookup"`)

	o := shoalctl(t, nil, "--version")
	if o.code != exitOK || !strings.HasPrefix(o.stdout, "shoalctl ") || strings.Count(o.stdout, "\n") != 1 ||
		!strings.Contains(o.stdout, version.Get().GoVersion+")") {
		t.Fatalf("--version: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
}

// TestShoalctlCompletion: each shell's script names every command, and
// the ones a shell here can parse, parse.
func TestShoalctlCompletion(t *testing.T) {
	for _, shell := range completionShells {
		o := shoalctl(t, nil, "completion", shell)
		if o.code != exitOK || o.stderr != "" {
			t.Fatalf("%s: exit %d, stderr %q", shell, o.code, o.stderr)
		}
		for _, c := range commandNames() {
			if !strings.Contains(o.stdout, c) {
				t.Errorf("%s: the script does not name %s", shell, c)
			}
		}
		path, err := exec.LookPath(shell)
		if err != nil {
			t.Logf("%s: not installed; the script is not parsed", shell)
			continue
		}
		check := exec.Command(path, "-n")
		if shell == "fish" {
			check = exec.Command(path, "--no-execute")
		}
		check.Stdin = strings.NewReader(o.stdout)
		if out, err := check.CombinedOutput(); err != nil {
			t.Fatalf("%s -n: %v\n%s\n%s", shell, err, out, o.stdout)
		}
	}
	shoalctl(t, nil, "completion", "tcsh").failsWith(t, exitUsage, `completion: want one of bash, zsh, fish, not "tcsh"`)
	shoalctl(t, nil, "completion").failsWith(t, exitUsage, "completion: missing SHELL")
}

// TestShoalctlBashCompletionCompletes runs the bash function as bash
// would on a partial command line.
func TestShoalctlBashCompletionCompletes(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		// The script is bash's own language: without bash there is
		// nothing to run it in (the script's text is still checked by
		// TestShoalctlCompletion).
		t.Skip("bash is not installed") // nothing to run a bash script in; its text is checked by TestShoalctlCompletion
	}
	script := shoalctl(t, nil, "completion", "bash").stdout
	for _, tc := range []struct{ line, want string }{
		{"shoalctl fe", "fetch"},
		{"shoalctl fetch t --fo", "--format"},
		{"shoalctl help comp", "completion"},
	} {
		words := strings.Fields(tc.line)
		prog := fmt.Sprintf("%s\nCOMP_WORDS=(%s); COMP_CWORD=%d; _shoalctl; echo \"${COMPREPLY[*]}\"",
			script, strings.Join(words, " "), len(words)-1)
		out, err := exec.Command(bash, "-c", prog).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != tc.want {
			t.Errorf("%q: completes to %q (%v), want %q", tc.line, out, err, tc.want)
		}
	}
}

// TestShoalctlProduceStdinAndFetchFormats: records from stdin, a binary
// one among them, come back byte for byte in every format.
func TestShoalctlProduceStdinAndFetchFormats(t *testing.T) {
	cl, servers := startNodes(t, 1)
	cl.SetOwner("t", "n1")
	const n = 2500
	var in bytes.Buffer
	for i := range n - 1 {
		fmt.Fprintf(&in, "record %d\n", i)
	}
	binary := []byte{0xff, 0xfe, 0x00, 'x', 0x80}
	in.Write(binary) // the last line, with no line break
	o := shoalctlIn(t, in.Bytes(), servers, "--json", "produce", "t", "-")
	if o.code != exitOK {
		t.Fatalf("produce -: exit %d, %s", o.code, o.stderr)
	}
	total, next := 0, uint64(0)
	for line := range strings.SplitSeq(strings.TrimSuffix(o.stdout, "\n"), "\n") {
		var b stdinBatchJSON
		if err := json.Unmarshal([]byte(line), &b); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if b.Records < 1 || b.Records > stdinBatchRecords || b.Offset != next || b.Topic != "t" {
			t.Fatalf("batch %+v after %d records", b, total)
		}
		total += b.Records
		next += uint64(b.Records)
	}
	recs := cl.Records("t")
	if total != n || len(recs) != n || string(recs[0]) != "record 0" || !bytes.Equal(recs[n-1], binary) {
		t.Fatalf("%d records acknowledged, %d stored (first %q, last %q)", total, len(recs), recs[0], recs[len(recs)-1])
	}

	from := fmt.Sprint(n - 2)
	var f fetchedJSON
	o = shoalctl(t, servers, "--json", "fetch", "t", "--from", from)
	if err := json.Unmarshal([]byte(o.stdout), &f); err != nil || len(f.Records) != 2 {
		t.Fatalf("fetch: %q %v", o.stdout, err)
	}
	if f.Records[0] != (recordJSON{Offset: n - 2, Epoch: 1, Value: fmt.Sprintf("record %d", n-2)}) ||
		f.Records[1] != (recordJSON{Offset: n - 1, Epoch: 1, Value: base64.StdEncoding.EncodeToString(binary), Encoding: "base64"}) {
		t.Fatalf("fetch --json: %+v", f.Records)
	}
	o = shoalctl(t, servers, "--json", "fetch", "t", "--from", from, "--format", "base64")
	if err := json.Unmarshal([]byte(o.stdout), &f); err != nil || len(f.Records) != 2 ||
		f.Records[0].Value != base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("record %d", n-2))) || f.Records[0].Encoding != "base64" {
		t.Fatalf("fetch --format base64: %q %v", o.stdout, err)
	}
	o = shoalctl(t, servers, "fetch", "t", "--from", from, "--format", "raw")
	if want := fmt.Sprintf("record %d\n%s\n", n-2, binary); o.code != exitOK || o.stdout != want {
		t.Fatalf("fetch --format raw: %q, want %q", o.stdout, want)
	}
	o = shoalctl(t, servers, "fetch", "t", "--from", from)
	if o.code != exitOK || !strings.Contains(o.stdout, `"\xff\xfe\x00x\x80"`) {
		t.Fatalf("fetch table: %q", o.stdout)
	}
	shoalctl(t, servers, "--json", "fetch", "t", "--format", "raw").failsWith(t, exitUsage, "--format raw")
	shoalctl(t, servers, "fetch", "t", "--format", "hex").failsWith(t, exitUsage, `--format wants one of text, base64, raw, not "hex"`)

	// A line longer than a record may be stops the command with one line
	// on stderr, after what was acknowledged.
	long := append([]byte("ok\n"), bytes.Repeat([]byte("x"), 1<<20+1)...)
	o = shoalctlIn(t, long, servers, "produce", "t", "-")
	if o.code != exitUsage || !strings.Contains(o.stderr, "stdin line 2: longer than a record may be") {
		t.Fatalf("long line: exit %d, stderr %q", o.code, o.stderr)
	}
}
