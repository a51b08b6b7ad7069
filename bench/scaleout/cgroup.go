//go:build linux

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The cgroup mounts looked for, cgroup v1's cpu controller first (it is
// where the etcd harness holds its members too), then a v2 hierarchy with
// the cpu controller.
const (
	cgroupV1CPU   = "/sys/fs/cgroup/cpu"
	cgroupV2Roots = "/sys/fs/cgroup/unified:/sys/fs/cgroup"
)

// cfsPeriodUs is the CFS period every group gets; a quota of
// cores × cfsPeriodUs holds the group to that share of one core.
const cfsPeriodUs = 100_000

// groupPrefix names the parent group of a run, followed by its pid, so
// that a later run can tell a group whose run died and remove it.
const groupPrefix = "shoal-scaleout-"

// rmdirWait bounds how long remove waits for a group's processes to be
// gone (a killed process leaves its group once it has been reaped).
const rmdirWait = 10 * time.Second

// ErrNoCgroup: no cgroup hierarchy with a cpu controller this process
// can use.
var ErrNoCgroup = errors.New("no cgroup v1 cpu controller nor cgroup v2 hierarchy with the cpu controller")

// cgroups is the parent group of one run and the groups made under it.
type cgroups struct {
	v2     bool
	parent string // the run's group
	made   []string
}

// newCgroups makes the run's parent group in the first usable hierarchy,
// after removing the groups of earlier runs whose process is gone.
func newCgroups() (*cgroups, error) {
	root, v2, err := cgroupRoot()
	if err != nil {
		return nil, err
	}
	sweepGroups(root)
	parent := filepath.Join(root, groupPrefix+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(parent, 0o755); err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	g := &cgroups{v2: v2, parent: parent}
	if v2 {
		// Children of this group may be given a cpu quota.
		if err := os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte("+cpu"), 0o644); err != nil {
			_ = os.Remove(parent)
			return nil, fmt.Errorf("cgroup: enable cpu under %s: %w", parent, err)
		}
	}
	return g, nil
}

// cgroupRoot returns where to make groups and whether it is cgroup v2.
func cgroupRoot() (string, bool, error) {
	if _, err := os.Stat(filepath.Join(cgroupV1CPU, "cpu.cfs_quota_us")); err == nil {
		return cgroupV1CPU, false, nil
	}
	for _, root := range strings.Split(cgroupV2Roots, ":") {
		b, err := os.ReadFile(filepath.Join(root, "cgroup.subtree_control"))
		if err != nil {
			continue
		}
		if slices.Contains(strings.Fields(string(b)), "cpu") {
			return root, true, nil
		}
	}
	return "", false, ErrNoCgroup
}

// sweepGroups removes the run groups under root whose process is gone,
// with their children (empty: their processes died with that run).
func sweepGroups(root string) {
	ents, _ := os.ReadDir(root)
	for _, e := range ents {
		pid, err := strconv.Atoi(strings.TrimPrefix(e.Name(), groupPrefix))
		if !e.IsDir() || !strings.HasPrefix(e.Name(), groupPrefix) || err != nil || alive(pid) {
			continue
		}
		dir := filepath.Join(root, e.Name())
		kids, _ := os.ReadDir(dir)
		for _, k := range kids {
			if k.IsDir() {
				_ = os.Remove(filepath.Join(dir, k.Name()))
			}
		}
		_ = os.Remove(dir)
	}
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// group makes the child group name held to cores of one core (0: no
// quota, a group of its own all the same) and returns its path.
func (g *cgroups) group(name string, cores float64) (string, error) {
	dir := filepath.Join(g.parent, name)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("cgroup: %w", err)
	}
	g.made = append(g.made, dir)
	if err := setQuota(dir, g.v2, cores); err != nil {
		return "", err
	}
	return dir, nil
}

// setQuota holds the group at dir to cores of one core; 0 lifts the
// quota.
func setQuota(dir string, v2 bool, cores float64) error {
	quota := int64(cores * cfsPeriodUs)
	if v2 {
		v := "max " + strconv.Itoa(cfsPeriodUs)
		if cores > 0 {
			v = strconv.FormatInt(quota, 10) + " " + strconv.Itoa(cfsPeriodUs)
		}
		if err := os.WriteFile(filepath.Join(dir, "cpu.max"), []byte(v), 0o644); err != nil {
			return fmt.Errorf("cgroup: %s: %w", dir, err)
		}
		return nil
	}
	if cores <= 0 {
		quota = -1
	}
	if err := os.WriteFile(filepath.Join(dir, "cpu.cfs_period_us"), []byte(strconv.Itoa(cfsPeriodUs)), 0o644); err != nil {
		return fmt.Errorf("cgroup: %s: %w", dir, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cpu.cfs_quota_us"), []byte(strconv.FormatInt(quota, 10)), 0o644); err != nil {
		return fmt.Errorf("cgroup: %s: %w", dir, err)
	}
	return nil
}

// throttled returns how long the group at dir was held back by its quota
// so far.
func (g *cgroups) throttled(dir string) (time.Duration, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		return 0, err
	}
	key, unit := "throttled_time", time.Nanosecond // v1: ns
	if g.v2 {
		key, unit = "throttled_usec", time.Microsecond
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == key {
			v, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("cgroup: %s: %w", dir, err)
			}
			return time.Duration(v) * unit, nil
		}
	}
	return 0, fmt.Errorf("cgroup: %s has no %s", dir, key)
}

// remove removes every group made, children first, waiting for each to be
// empty; it returns the first failure.
func (g *cgroups) remove() error {
	var first error
	for i := len(g.made) - 1; i >= 0; i-- {
		if err := rmdirEmpty(g.made[i]); err != nil && first == nil {
			first = err
		}
	}
	g.made = nil
	if err := rmdirEmpty(g.parent); err != nil && first == nil {
		first = err
	}
	return first
}

// rmdirEmpty removes the group at dir once its processes are gone.
func rmdirEmpty(dir string) error {
	deadline := time.Now().Add(rmdirWait)
	for {
		err := os.Remove(dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("cgroup: remove %s: %w", dir, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// enterCommand returns the program and arguments that put themselves into
// the group at dir and then exec name with args in the same process, so
// that the pid a caller sees is the program's.
func enterCommand(dir, name string, args []string) (string, []string) {
	script := `echo $$ > "$0/cgroup.procs" && exec "$@"`
	return "/bin/sh", append([]string{"-c", script, dir, name}, args...)
}
