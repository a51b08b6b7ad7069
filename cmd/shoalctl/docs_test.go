package main

import (
	"context"
	"errors"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/shoalmq/shoal/client"
	"github.com/shoalmq/shoal/wire"
)

// cliDoc is docs/cli.md, the reference of every command, flag, JSON key
// and exit code.
func cliDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// docSection returns the part of doc from the heading start to the next
// heading of the same level.
func docSection(t *testing.T, doc, start string) string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, "\n"+start+"\n")
	if !ok {
		t.Fatalf("docs/cli.md has no heading %q", start)
	}
	level := start[:strings.Index(start, " ")+1]
	if i := strings.Index(rest, "\n"+level); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// docRow returns the line of doc that starts with prefix, a table row.
func docRow(doc, prefix string) (string, bool) {
	for line := range strings.SplitSeq(doc, "\n") {
		if strings.HasPrefix(line, prefix) {
			return line, true
		}
	}
	return "", false
}

// TestDocsListEveryCommand: docs/cli.md's table of commands has a row for
// each command that names each of its flags, and a paragraph on it.
func TestDocsListEveryCommand(t *testing.T) {
	doc := cliDoc(t)
	for _, name := range commandNames() {
		row, ok := docRow(doc, "| `"+name+" ")
		if !ok {
			row, ok = docRow(doc, "| `"+name+"`")
		}
		if !ok {
			t.Errorf("docs/cli.md: no row for the command %s", name)
			continue
		}
		for _, f := range flagNames(name) {
			if !strings.Contains(row, f+" ") && !strings.Contains(row, f+"]") {
				t.Errorf("docs/cli.md: the row of %s does not name %s: %s", name, f, row)
			}
		}
		if name != "help" && name != "completion" && !strings.Contains(doc, "**`"+name) {
			t.Errorf("docs/cli.md: no paragraph on %s (**`%s …`**)", name, name)
		}
	}
}

// TestDocsListEveryGlobalFlag: docs/cli.md's table of global flags has a
// row for each.
func TestDocsListEveryGlobalFlag(t *testing.T) {
	doc := cliDoc(t)
	for _, f := range flagNames("") {
		if !strings.Contains(doc, "| `"+f) {
			t.Errorf("docs/cli.md: no row for the global flag %s", f)
		}
	}
	if !strings.Contains(doc, "| `--help`, `-h` |") {
		t.Error("docs/cli.md does not name -h")
	}
	for _, v := range []string{"SHOAL_SERVERS", "SHOAL_CLUSTER_ID", "SHOAL_TLS_CA", "SHOAL_TLS_CERT", "SHOAL_TLS_KEY", "SHOAL_TOKEN", "SHOAL_SECRET"} {
		if !strings.Contains(doc, "`"+v+"`") {
			t.Errorf("docs/cli.md does not name %s", v)
		}
	}
}

// TestDocsListEveryExitAndErrorCode: docs/cli.md's tables name each exit
// status and each JSON error code shoalctl prints.
func TestDocsListEveryExitAndErrorCode(t *testing.T) {
	doc := docSection(t, cliDoc(t), "### Errors and exit codes")
	for _, status := range []int{exitOK, exitFailed, exitUsage, exitUnreachable} {
		if !strings.Contains(doc, "\n| "+string(rune('0'+status))+" |") {
			t.Errorf("docs/cli.md: no row for exit status %d", status)
		}
	}
	codes := map[string]int{}
	for _, err := range []error{
		usagef("x"), client.ErrInvalidArgument, client.ErrBadPosition, client.ErrWatchTooSlow,
		client.ErrCompacted, context.DeadlineExceeded, client.ErrHandshake, client.ErrProtocol,
		client.ErrUnreachable, context.Canceled, errors.New("x"),
	} {
		code, status := classify(err)
		codes[code] = status
	}
	for c := wire.ErrorCode(1); c.Known(); c++ {
		code, status := classify(&wire.ErrorResponse{Code: c})
		codes[code] = status
	}
	for code, status := range codes {
		if !strings.Contains(doc, "| `"+code+"` |") {
			t.Errorf("docs/cli.md: no row for the error code %s", code)
		}
		row, ok := docRow(doc, "| "+string(rune('0'+status))+" |")
		if !ok {
			continue
		}
		if !strings.Contains(row, "`"+code+"`") && !(status == exitFailed && strings.Contains(row, "a protocol code")) {
			t.Errorf("docs/cli.md: the row of exit %d does not name %s", status, code)
		}
	}
}

// TestDocsListEveryJSONKey: each row of docs/cli.md's JSON table names
// every key of the command's --json line.
func TestDocsListEveryJSONKey(t *testing.T) {
	doc := docSection(t, cliDoc(t), "### JSON output")
	for _, c := range []struct {
		row    string
		shapes []any
	}{
		{"| `assign`, `lookup` |", []any{assignmentJSON{}}},
		{"| `revoke` |", []any{revokedJSON{}}},
		{"| `produce` |", []any{producedJSON{}}},
		{"| `produce TOPIC -` |", []any{stdinBatchJSON{}}},
		{"| `fetch` |", []any{fetchedJSON{}, recordJSON{}}},
		{"| `members` |", []any{membersJSON{}, memberJSON{}}},
		{"| `shards` |", []any{shardsJSON{}, shardJSON{}}},
		{"| `status` |", []any{statusJSON{}}},
		{"| `watch` |", []any{changeJSON{}, watchSplitJSON{}}},
		{"| `topics` |", []any{topicsJSON{}, assignmentJSON{}}},
		{"| `bench` |", []any{benchJSON{}}},
		{"| `drain` |", []any{drainedJSON{}}},
		{"| `undrain` |", []any{undrainedJSON{}}},
		{"| `transfer-leader` |", []any{transferredJSON{}}},
		{"| `split` |", []any{splitJSON{}}},
		{"| `remove` |", []any{removedJSON{}}},
		{"| any error (stderr) |", []any{errorJSON{}, errorBody{}}},
	} {
		row, ok := docRow(doc, c.row)
		if !ok {
			t.Errorf("docs/cli.md: no JSON row %s", c.row)
			continue
		}
		for _, shape := range c.shapes {
			for _, key := range jsonKeys(reflect.TypeOf(shape)) {
				if !strings.Contains(row, `"`+key+`"`) {
					t.Errorf("docs/cli.md: the JSON row %s does not name %q", c.row, key)
				}
			}
		}
	}
	// Every command that prints a result has a row.
	for _, name := range commandNames() {
		if slices.Contains([]string{"help", "completion"}, name) {
			continue
		}
		if !strings.Contains(doc, "| `"+name+"`") && !strings.Contains(doc, ", `"+name+"`") {
			t.Errorf("docs/cli.md: no JSON row for %s", name)
		}
	}
}

// jsonKeys are the keys of a struct's JSON encoding.
func jsonKeys(t reflect.Type) []string {
	var keys []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			keys = append(keys, name)
		}
	}
	return keys
}
