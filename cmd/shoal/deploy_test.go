package main

import (
	"bufio"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The files of deploy/ and the Dockerfile cannot be run here (no Docker,
// no systemd); these tests hold what they tell shoal node to what shoal
// node takes.

// TestDeployConfigExample: the systemd config example parses as it is,
// the secret file aside (it names /etc/shoal/secret).
func TestDeployConfigExample(t *testing.T) {
	secret := writeFile(t, "secret", "s3cret\n")
	o, err := parseNodeArgs([]string{"--config", "../../deploy/systemd/shoal.conf"}, envOf(map[string]string{"SHOAL_SECRET_FILE": secret}))
	if err != nil {
		t.Fatal(err)
	}
	if o.id != "n1" || o.bootstrapExpect != 3 || len(o.join) != 3 || o.metricsAddr == "" {
		t.Fatalf("the example says %+v", o)
	}
	unit, err := os.ReadFile("../../deploy/systemd/shoal.service")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(unit), "ExecStart=/usr/local/bin/shoal node --config /etc/shoal/shoal.conf\n") ||
		!strings.Contains(string(unit), "RestartPreventExitStatus="+itoa(exitUsage)+"\n") {
		t.Fatal("the unit does not start shoal node with the config, or restarts on a usage error")
	}
}

func itoa(n int) string { return string(rune('0' + n)) }

var (
	composeService = regexp.MustCompile(`^  (n[0-9]+):$`)
	composeEnv     = regexp.MustCompile(`^\s+(SHOAL_[A-Z_]+): "?([^"]*)"?$`)
	composeIP      = regexp.MustCompile(`ipv4_address: ([0-9.]+)`)
)

// TestDeployCompose: each node of the compose file starts from its
// variables (and the image's), with its own id, the addresses of its
// fixed IP, and every node's SWIM address in the join list.
func TestDeployCompose(t *testing.T) {
	f, err := os.Open("../../deploy/docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	image := dockerfileEnv(t)
	shared := map[string]string{}
	nodes := map[string]map[string]string{}
	ips := map[string]string{}
	var cur map[string]string
	var name string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "x-env: &env":
			cur, name = shared, ""
		case composeService.MatchString(line):
			name = composeService.FindStringSubmatch(line)[1]
			cur = map[string]string{}
			nodes[name] = cur
		case composeEnv.MatchString(line) && cur != nil:
			m := composeEnv.FindStringSubmatch(line)
			cur[m[1]] = m[2]
		case composeIP.MatchString(line) && name != "":
			ips[name] = composeIP.FindStringSubmatch(line)[1]
		}
	}
	if len(nodes) != 3 {
		t.Fatalf("%d nodes in the compose file", len(nodes))
	}
	secret := writeFile(t, "secret", "s3cret\n")
	var ids []string
	for name, vars := range nodes {
		env := map[string]string{}
		for _, m := range []map[string]string{image, shared, vars} {
			for k, v := range m {
				env[k] = v
			}
		}
		if env["SHOAL_SECRET_FILE"] != "/run/secrets/cluster_secret" {
			t.Errorf("%s: secret file %q", name, env["SHOAL_SECRET_FILE"])
		}
		env["SHOAL_SECRET_FILE"] = secret
		o, err := parseNodeArgs(nil, envOf(env))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ip := ips[name]
		if o.id != name || o.dataDir != "/var/lib/shoal" || !strings.HasPrefix(o.swimAddr, ip+":") ||
			!strings.HasPrefix(o.clientAddr, ip+":") || !strings.HasPrefix(o.peerAddr, ip+":") ||
			!slices.Contains(o.join, o.swimAddr) || o.bootstrapExpect != 3 {
			t.Errorf("%s (ip %s): %+v", name, ip, o)
		}
		ids = append(ids, o.id)
	}
	slices.Sort(ids)
	if len(slices.Compact(ids)) != 3 {
		t.Fatalf("ids %v", ids)
	}
}

// dockerfileEnv reads the SHOAL_* variables the image's ENV sets, and
// checks that each is the variable of a flag of shoal node.
func dockerfileEnv(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	inEnv := false
	for line := range strings.SplitSeq(string(b), "\n") {
		if strings.HasPrefix(line, "ENV ") {
			inEnv, line = true, strings.TrimPrefix(line, "ENV ")
		}
		if !inEnv {
			continue
		}
		for _, kv := range strings.Fields(strings.TrimSuffix(line, "\\")) {
			if k, v, ok := strings.Cut(kv, "="); ok {
				env[k] = v
			}
		}
		inEnv = strings.HasSuffix(line, "\\")
	}
	known := map[string]bool{}
	newNodeFlagSet(&nodeOptions{}).VisitAll(func(f *flag.Flag) { known[envName(f.Name)] = true })
	for k := range env {
		if !known[k] {
			t.Errorf("the Dockerfile sets %s, which is no variable of shoal node", k)
		}
	}
	if len(env) == 0 {
		t.Fatal("the Dockerfile sets no variable")
	}
	return env
}
