//go:build linux

package proccluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
)

// bridgeNet is the network of a namespace-mode cluster: one network
// namespace per node, each joined to one bridge by a veth pair, on
// 10.202.X.0/24 (the nodes .1, .2, ..., the bridge .254). This process, in
// the host's namespace, has the bridge's address and so reaches every node
// until its link is cut.
//
// Names carry a tag made of this process's pid and a counter (both base
// 36), so that clusters of one process and of several processes never
// collide, and so that sweepStale can tell the namespaces of a process
// that died from those of one still running:
//
//	namespace  pcl-TAG-nI   bridge  pcbTAG   veth  pcvTAG-I (host end), pcpTAG-I (node end)
type bridgeNet struct {
	tag    string
	bridge string
	subnet string // "10.202.X"
	ns     []string
	veth   []string // host ends
}

// nsDir is where `ip netns` keeps its named namespaces.
const nsDir = "/var/run/netns"

var clusterCount atomic.Uint32

// newTag is this process's pid in 5 base-36 digits (pids are below 2^22)
// and a per-process counter in 2.
func newTag() string {
	return pad(strconv.FormatInt(int64(os.Getpid()), 36), 5) +
		pad(strconv.FormatUint(uint64(clusterCount.Add(1)%(36*36)), 36), 2)
}

// pad puts zeros before s up to n characters.
func pad(s string, n int) string {
	if len(s) >= n {
		return s
	}
	return strings.Repeat("0", n-len(s)) + s
}

// tagPID is the pid a tag was made by, or 0 if s is no tag.
func tagPID(s string) int {
	if len(s) != 7 {
		return 0
	}
	pid, err := strconv.ParseInt(strings.TrimLeft(s[:5], "0"), 36, 64)
	if err != nil {
		return 0
	}
	return int(pid)
}

// alive reports whether a process with pid exists.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func run(args ...string) error {
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		return fmt.Errorf("proccluster: %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// pickSubnet returns a 10.202.X prefix no interface of the host has an
// address in, starting from one chosen by the tag.
func pickSubnet(tag string) (string, error) {
	out, err := exec.Command("ip", "-o", "-4", "addr", "show").Output()
	if err != nil {
		return "", fmt.Errorf("proccluster: ip addr show: %w", err)
	}
	start := 0
	for _, ch := range tag {
		start = (start*31 + int(ch)) % 250
	}
	for k := range 250 {
		subnet := fmt.Sprintf("10.202.%d", (start+k)%250)
		if !strings.Contains(string(out), " "+subnet+".") {
			return subnet, nil
		}
	}
	return "", errors.New("proccluster: every 10.202.X.0/24 subnet is in use")
}

// newBridgeNet makes the bridge and n namespaces linked to it. On error
// the bridgeNet holds what was made, for teardown.
func newBridgeNet(n int) (*bridgeNet, error) {
	tag := newTag()
	b := &bridgeNet{tag: tag, bridge: "pcb" + tag}
	subnet, err := pickSubnet(tag)
	if err != nil {
		return b, err
	}
	b.subnet = subnet
	if err := run("ip", "link", "add", b.bridge, "type", "bridge"); err != nil {
		b.bridge = "" // not made: nothing to remove
		return b, err
	}
	steps := [][]string{
		{"ip", "addr", "add", b.subnet + ".254/24", "dev", b.bridge},
		{"ip", "link", "set", b.bridge, "up"},
	}
	for _, s := range steps {
		if err := run(s...); err != nil {
			return b, err
		}
	}
	for i := range n {
		ns := fmt.Sprintf("pcl-%s-n%d", tag, i+1)
		host, peer := fmt.Sprintf("pcv%s-%d", tag, i+1), fmt.Sprintf("pcp%s-%d", tag, i+1)
		if err := run("ip", "netns", "add", ns); err != nil {
			return b, err
		}
		b.ns = append(b.ns, ns)
		if err := run("ip", "link", "add", host, "type", "veth", "peer", "name", peer); err != nil {
			return b, err
		}
		b.veth = append(b.veth, host)
		steps := [][]string{
			{"ip", "link", "set", peer, "netns", ns},
			{"ip", "-n", ns, "link", "set", "lo", "up"},
			{"ip", "-n", ns, "addr", "add", b.ip(i) + "/24", "dev", peer},
			{"ip", "-n", ns, "link", "set", peer, "up"},
			{"ip", "link", "set", host, "master", b.bridge},
			{"ip", "link", "set", host, "up"},
		}
		for _, s := range steps {
			if err := run(s...); err != nil {
				return b, err
			}
		}
	}
	return b, nil
}

func (b *bridgeNet) ip(i int) string { return fmt.Sprintf("%s.%d", b.subnet, i+1) }

// setLink takes node i's link up or down (its host end: the node keeps
// its address and its namespace's loopback).
func (b *bridgeNet) setLink(i int, up bool) error {
	state := "down"
	if up {
		state = "up"
	}
	return run("ip", "link", "set", b.veth[i], state)
}

// linkBytes reads the host end's counters: what the host end received is
// what the node sent.
func (b *bridgeNet) linkBytes(i int) (sent, received uint64, err error) {
	read := func(name string) (uint64, error) {
		raw, err := os.ReadFile(filepath.Join("/sys/class/net", b.veth[i], "statistics", name))
		if err != nil {
			return 0, fmt.Errorf("proccluster: %w", err)
		}
		return strconv.ParseUint(strings.TrimSpace(string(raw)), 10, 64)
	}
	if sent, err = read("rx_bytes"); err != nil {
		return 0, 0, err
	}
	received, err = read("tx_bytes")
	return sent, received, err
}

// teardown removes the namespaces (each takes its veth pair along) and the
// bridge.
func (b *bridgeNet) teardown() error {
	var errs []error
	for _, ns := range b.ns {
		if err := run("ip", "netns", "del", ns); err != nil {
			errs = append(errs, err)
		}
	}
	// A veth whose node end never reached its namespace.
	for i, host := range b.veth {
		if i >= len(b.ns) || linkExists(host) {
			_ = run("ip", "link", "del", host)
		}
	}
	if b.bridge != "" && linkExists(b.bridge) {
		if err := run("ip", "link", "del", b.bridge); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func linkExists(name string) bool {
	_, err := os.Stat(filepath.Join("/sys/class/net", name))
	return err == nil
}

// sweepStale removes the namespaces and bridges left by clusters whose
// process died without closing them (it was killed with SIGKILL): their
// tag names a pid that no longer runs. Failures are ignored: this is
// housekeeping.
func sweepStale() {
	if entries, err := os.ReadDir(nsDir); err == nil {
		for _, e := range entries {
			rest, ok := strings.CutPrefix(e.Name(), "pcl-")
			if !ok {
				continue
			}
			tag, _, ok := strings.Cut(rest, "-")
			if pid := tagPID(tag); ok && pid > 0 && !alive(pid) {
				_ = run("ip", "netns", "del", e.Name())
			}
		}
	}
	if entries, err := os.ReadDir("/sys/class/net"); err == nil {
		for _, e := range entries {
			tag, ok := strings.CutPrefix(e.Name(), "pcb")
			if pid := tagPID(tag); ok && pid > 0 && !alive(pid) {
				_ = run("ip", "link", "del", e.Name())
			}
		}
	}
}
