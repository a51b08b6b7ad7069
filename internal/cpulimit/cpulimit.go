// Package cpulimit reads the CPU bandwidth limit of the cgroup the process
// runs in: the cgroup v1 cpu controller's cfs quota and period, or cgroup
// v2's cpu.max, the smallest along the path from the process's group up to
// its hierarchy's root. Linux only; elsewhere there is never a limit.
package cpulimit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
)

// Limit returns the process's CPU limit in cores; ok is false when no
// limit is set (or no cgroup hierarchy is mounted).
func Limit() (cores float64, ok bool, err error) {
	return limit(os.DirFS("/"))
}

// limit reads the limit in fsys, a file system rooted where / would be.
func limit(fsys fs.FS) (float64, bool, error) {
	groups, err := fs.ReadFile(fsys, "proc/self/cgroup")
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	v1, v2, hasV1, hasV2 := ownGroups(groups)
	if !hasV1 && !hasV2 {
		return 0, false, nil
	}
	mounts, err := fs.ReadFile(fsys, "proc/self/mountinfo")
	if err != nil {
		return 0, false, err
	}
	mnt, root, version := cpuMount(mounts, hasV1, hasV2)
	if version == 0 {
		return 0, false, nil
	}
	group := v2
	if version == 1 {
		group = v1
	}
	// The process's group relative to what the mount shows (a container
	// sees its own group as the mount's root).
	rel, inside := strings.CutPrefix(group, root)
	if !inside || (root != "/" && rel != "" && rel[0] != '/') {
		return 0, false, nil
	}
	dir := strings.TrimPrefix(path.Join(mnt, rel), "/")
	top := strings.TrimPrefix(path.Clean(mnt), "/")
	best, found := 0.0, false
	for {
		cores, ok, err := groupLimit(fsys, dir, version)
		if err != nil {
			return 0, false, err
		}
		if ok && (!found || cores < best) {
			best, found = cores, true
		}
		if dir == top || dir == "." || dir == "" {
			return best, found, nil
		}
		dir = path.Dir(dir)
	}
}

// ownGroups finds the process's group in the cgroup v1 hierarchy with the
// cpu controller and in the v2 hierarchy, from /proc/self/cgroup.
func ownGroups(b []byte) (v1, v2 string, hasV1, hasV2 bool) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		id, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		ctrls, group, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		if id == "0" && ctrls == "" {
			v2, hasV2 = group, true
			continue
		}
		for c := range strings.SplitSeq(ctrls, ",") {
			if c == "cpu" {
				v1, hasV1 = group, true
			}
		}
	}
	return v1, v2, hasV1, hasV2
}

// cpuMount finds where the cpu controller's hierarchy is mounted, from
// /proc/self/mountinfo: the mount point, the group it shows as its root,
// and the cgroup version (0: none). A v1 cpu controller wins over v2, as
// the kernel gives cpu to at most one of them.
func cpuMount(b []byte, hasV1, hasV2 bool) (mnt, root string, version int) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		// id parent major:minor root mount-point options [optional...] - fstype source super-options
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 {
			continue
		}
		switch {
		case hasV1 && g[0] == "cgroup" && hasOption(g[2], "cpu"):
			return unescape(f[4]), unescape(f[3]), 1
		case hasV2 && g[0] == "cgroup2" && version == 0:
			mnt, root, version = unescape(f[4]), unescape(f[3]), 2
		}
	}
	return mnt, root, version
}

func hasOption(opts, want string) bool {
	for o := range strings.SplitSeq(opts, ",") {
		if o == want {
			return true
		}
	}
	return false
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// groupLimit reads one group's limit; ok is false when it sets none.
func groupLimit(fsys fs.FS, dir string, version int) (float64, bool, error) {
	if version == 2 {
		b, err := fs.ReadFile(fsys, path.Join(dir, "cpu.max"))
		if errors.Is(err, fs.ErrNotExist) {
			return 0, false, nil
		}
		if err != nil {
			return 0, false, err
		}
		quota, period, ok := strings.Cut(strings.TrimSpace(string(b)), " ")
		if !ok {
			return 0, false, fmt.Errorf("cpulimit: %s/cpu.max: %q", dir, b)
		}
		if quota == "max" {
			return 0, false, nil
		}
		return ratio(dir+"/cpu.max", quota, period)
	}
	q, err := fs.ReadFile(fsys, path.Join(dir, "cpu.cfs_quota_us"))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	quota := strings.TrimSpace(string(q))
	if strings.HasPrefix(quota, "-") {
		return 0, false, nil // -1: no limit
	}
	p, err := fs.ReadFile(fsys, path.Join(dir, "cpu.cfs_period_us"))
	if err != nil {
		return 0, false, err
	}
	return ratio(dir+"/cpu.cfs_quota_us", quota, strings.TrimSpace(string(p)))
}

func ratio(file, quota, period string) (float64, bool, error) {
	q, err := strconv.ParseUint(quota, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("cpulimit: %s: quota %q", file, quota)
	}
	p, err := strconv.ParseUint(period, 10, 64)
	if err != nil || p == 0 {
		return 0, false, fmt.Errorf("cpulimit: %s: period %q", file, period)
	}
	return float64(q) / float64(p), true, nil
}
