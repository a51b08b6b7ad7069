package main

import (
	"context"
	"crypto/tls"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shoalmq/shoal/client"
	"github.com/shoalmq/shoal/internal/testcerts"
	"github.com/shoalmq/shoal/node/security"
)

const (
	testAdmin = "admin-token-for-the-tests-0"
	testRead  = "read-token-for-the-tests-00"
	testKey1  = "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE="
	testKey2  = "AgICAgICAgICAgICAgICAg=="
)

func TestCredentialFlags(t *testing.T) {
	ca := testcerts.NewCA(t, "cluster")
	cert, key, caFile := ca.WriteFiles(t, t.TempDir(), "n1", ca.Node(t, "n1"))
	tokens := writeFile(t, "tokens", "# ops\n"+testAdmin+" admin\n\n"+testRead+"   read  # dashboards\n")
	keys := writeFile(t, "swim.keys", testKey1+"\n"+testKey2+"\n")
	o, err := parseNodeArgs(with("--client-token-file", tokens, "--swim-key-file", keys,
		"--tls-cert", cert, "--tls-key", key, "--tls-ca", caFile, "--tls-client-auth"), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.tokens) != 2 || o.tokens[0].Role != security.RoleAdmin || o.tokens[1].Role != security.RoleRead || o.tokens[1].Value != testRead {
		t.Fatalf("tokens %+v", o.tokens)
	}
	if len(o.swimKeys) != 2 || len(o.swimKeys[0]) != 32 || len(o.swimKeys[1]) != 16 {
		t.Fatalf("swim keys: %d", len(o.swimKeys))
	}
	if o.tls == nil || !o.tls.VerifyClients {
		t.Fatalf("tls %+v", o.tls)
	}
	cfg := o.nodeConfig(nil)
	if cfg.Security.TLS != o.tls || len(cfg.Security.ClientTokens) != 2 || len(cfg.Security.SwimKeys) != 2 {
		t.Fatalf("node config security %+v", cfg.Security)
	}
}

func TestCredentialFlagsReject(t *testing.T) {
	ca, other := testcerts.NewCA(t, "cluster"), testcerts.NewCA(t, "other")
	dir := t.TempDir()
	cert, key, caFile := ca.WriteFiles(t, dir, "n1", ca.Node(t, "n1"))
	strange, strangeKey, _ := other.WriteFiles(t, t.TempDir(), "n1", other.Node(t, "n1"))
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unknown role", with("--client-token-file", writeFile(t, "t", "# x\n"+testAdmin+" root\n")), "line 2: the role must be admin, write or read"},
		{"short token", with("--client-token-file", writeFile(t, "t", "abc admin\n")), "line 1: a token of 3 characters"},
		{"token alone", with("--client-token-file", writeFile(t, "t", "\n\n"+testAdmin+"\n")), "line 3: want TOKEN ROLE"},
		{"repeated token", with("--client-token-file", writeFile(t, "t", testAdmin+" admin\n"+testAdmin+" read\n")), "line 2: the token of line 1 again"},
		{"no token", with("--client-token-file", writeFile(t, "t", "# none yet\n")), "no token in it"},
		{"missing token file", with("--client-token-file", "/nonexistent/tokens"), "--client-token-file /nonexistent/tokens: open"},
		{"bad swim key", with("--swim-key-file", writeFile(t, "k", testKey1+"\nnot-a-key\n")), "--swim-key-file"},
		{"short swim key", with("--swim-key-file", writeFile(t, "k", "AQID\n")), "line 1: a key of 3 bytes"},
		{"cert without key", with("--tls-cert", cert, "--tls-ca", caFile), "go together"},
		{"client auth alone", with("--tls-client-auth"), "--tls-client-auth needs"},
		{"cert of another CA", with("--tls-cert", strange, "--tls-key", strangeKey, "--tls-ca", caFile), "not valid under the CA"},
		{"key of another cert", with("--tls-cert", cert, "--tls-key", strangeKey, "--tls-ca", caFile), "private key does not match"},
		{"CA not PEM", with("--tls-cert", cert, "--tls-key", key, "--tls-ca", writeFile(t, "ca", "hello\n")), "holds no PEM certificate"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseNodeArgs(c.args, noEnv)
			var ue *usageError
			if !errors.As(err, &ue) {
				t.Fatalf("err = %v, want a usage error", err)
			}
			if !strings.Contains(ue.msg, c.want) || strings.Contains(ue.msg, "\n") {
				t.Fatalf("message %q, want one line containing %q", ue.msg, c.want)
			}
			if strings.Contains(ue.msg, testAdmin) || strings.Contains(ue.msg, testKey1[:10]) {
				t.Fatalf("the message shows a credential: %q", ue.msg)
			}
		})
	}
}

// TestRunSecuredNodeReloadsOnSIGHUP runs a node with every credential
// from files, talks to it with a token over TLS, then adds a token to the
// file and sends SIGHUP: the new token works, the removed one does not.
func TestRunSecuredNodeReloadsOnSIGHUP(t *testing.T) {
	ca := testcerts.NewCA(t, "cluster")
	dir := t.TempDir()
	cert, key, caFile := ca.WriteFiles(t, dir, "n1", ca.Node(t, "n1"))
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte(testAdmin+" admin\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	keys := writeFile(t, "swim.keys", testKey1+"\n")
	o, err := parseNodeArgs([]string{"--id", "n1", "--data", filepath.Join(dir, "n1"),
		"--client-addr", "127.0.0.1:0", "--peer-addr", "127.0.0.1:0", "--swim-addr", "127.0.0.1:0",
		"--shards", "4", "--replicas", "1", "--swim-preset", "fast", "--log-format", "json",
		"--secret-file", writeFile(t, "secret", "peers only\n"),
		"--client-token-file", tokens, "--swim-key-file", keys,
		"--tls-cert", cert, "--tls-key", key, "--tls-ca", caFile}, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	logs := syncWriter{ch: make(chan string, 4096)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	// The node's addresses come from its log.
	go func() { done <- runNode(ctx, o, logs) }()
	var clientAddr string
	waitLog := func(what string, take func(string) bool) {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for {
			select {
			case l := <-logs.ch:
				if strings.Contains(l, "INSECURE") || strings.Contains(l, testAdmin) {
					t.Fatalf("log line: %s", l)
				}
				if take(l) {
					return
				}
			case err := <-done:
				t.Fatalf("runNode returned waiting for %s: %v", what, err)
			case <-deadline:
				t.Fatalf("no %s within 30s", what)
			}
		}
	}
	waitLog("the start line", func(l string) bool {
		if !strings.Contains(l, `"msg":"node started"`) {
			return false
		}
		_, rest, _ := strings.Cut(l, `"client":"`)
		clientAddr, _, _ = strings.Cut(rest, `"`)
		return true
	})
	waitLog("ready", func(l string) bool { return strings.Contains(l, `"msg":"node ready"`) })
	dial := func(tok string) error {
		c, err := client.New(client.Config{Servers: []string{clientAddr}, Token: tok, TLS: &tls.Config{RootCAs: ca.Pool}, MaxRetries: -1})
		if err != nil {
			return err
		}
		defer c.Close()
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		defer ccancel()
		_, err = c.Status(cctx, "")
		return err
	}
	if err := dial(testAdmin); err != nil {
		t.Fatalf("admin token over TLS: %v", err)
	}
	if err := dial(testRead); err == nil {
		t.Fatal("a token not yet in the file worked")
	}
	if err := os.WriteFile(tokens, []byte(testRead+" read\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog("the reload", func(l string) bool { return strings.Contains(l, "client tokens replaced") })
	if err := dial(testRead); err != nil {
		t.Fatalf("new token after SIGHUP: %v", err)
	}
	if err := dial(testAdmin); err == nil {
		t.Fatal("a token removed from the file still worked after SIGHUP")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("runNode did not return")
	}
}
