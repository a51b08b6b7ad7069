package cpulimit

import (
	"testing"
	"testing/fstest"
)

func file(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }

const (
	mountsV1 = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n" +
		"32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n" +
		"33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
	mountsV2 = "31 23 0:28 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate\n"
)

func TestLimit(t *testing.T) {
	for _, c := range []struct {
		name  string
		fs    fstest.MapFS
		cores float64
		ok    bool
	}{
		{"no proc", fstest.MapFS{}, 0, false},
		{"v1, no quota", fstest.MapFS{
			"proc/self/cgroup":                    file("9:name=systemd:/\n3:cpu:/\n"),
			"proc/self/mountinfo":                 file(mountsV1),
			"sys/fs/cgroup/cpu/cpu.cfs_quota_us":  file("-1\n"),
			"sys/fs/cgroup/cpu/cpu.cfs_period_us": file("100000\n"),
		}, 0, false},
		{"v1, a node's group", fstest.MapFS{
			"proc/self/cgroup":                       file("4:cpuacct:/\n3:cpu:/n1\n"),
			"proc/self/mountinfo":                    file(mountsV1),
			"sys/fs/cgroup/cpu/cpu.cfs_quota_us":     file("-1\n"),
			"sys/fs/cgroup/cpu/cpu.cfs_period_us":    file("100000\n"),
			"sys/fs/cgroup/cpu/n1/cpu.cfs_quota_us":  file("15000\n"),
			"sys/fs/cgroup/cpu/n1/cpu.cfs_period_us": file("100000\n"),
		}, 0.15, true},
		{"v1, the parent's limit is smaller", fstest.MapFS{
			"proc/self/cgroup":                                file("3:cpu,cpuacct:/a/b\n"),
			"proc/self/mountinfo":                             file("32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpuacct,cpu\n"),
			"sys/fs/cgroup/cpu,cpuacct/a/cpu.cfs_quota_us":    file("50000\n"),
			"sys/fs/cgroup/cpu,cpuacct/a/cpu.cfs_period_us":   file("100000\n"),
			"sys/fs/cgroup/cpu,cpuacct/a/b/cpu.cfs_quota_us":  file("300000\n"),
			"sys/fs/cgroup/cpu,cpuacct/a/b/cpu.cfs_period_us": file("100000\n"),
		}, 0.5, true},
		{"v2", fstest.MapFS{
			"proc/self/cgroup":               file("0::/shoal/n1\n"),
			"proc/self/mountinfo":            file(mountsV2),
			"sys/fs/cgroup/shoal/cpu.max":    file("max 100000\n"),
			"sys/fs/cgroup/shoal/n1/cpu.max": file("150000 100000\n"),
		}, 1.5, true},
		{"v2, no limit", fstest.MapFS{
			"proc/self/cgroup":         file("0::/n1\n"),
			"proc/self/mountinfo":      file(mountsV2),
			"sys/fs/cgroup/n1/cpu.max": file("max 100000\n"),
		}, 0, false},
		{"v2 in a cgroup namespace", fstest.MapFS{
			"proc/self/cgroup":      file("0::/\n"),
			"proc/self/mountinfo":   file("40 30 0:28 / /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n"),
			"sys/fs/cgroup/cpu.max": file("25000 100000\n"),
		}, 0.25, true},
		{"v2 in a container that sees its whole path", fstest.MapFS{
			"proc/self/cgroup":      file("0::/kubepods/pod1\n"),
			"proc/self/mountinfo":   file("40 30 0:28 /kubepods/pod1 /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n"),
			"sys/fs/cgroup/cpu.max": file("25000 100000\n"),
		}, 0.25, true},
		{"a group outside what the mount shows", fstest.MapFS{
			"proc/self/cgroup":      file("0::/podx/n1\n"),
			"proc/self/mountinfo":   file("40 30 0:28 /pod /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n"),
			"sys/fs/cgroup/cpu.max": file("25000 100000\n"),
		}, 0, false},
		{"escaped mount point", fstest.MapFS{
			"proc/self/cgroup":    file("0::/n1\n"),
			"proc/self/mountinfo": file(`40 30 0:28 / /cg\040roups rw - cgroup2 cgroup2 rw` + "\n"),
			"cg roups/n1/cpu.max": file("20000 100000\n"),
		}, 0.2, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cores, ok, err := limit(c.fs)
			if err != nil {
				t.Fatal(err)
			}
			if ok != c.ok || cores != c.cores {
				t.Errorf("limit = %v, %v; want %v, %v", cores, ok, c.cores, c.ok)
			}
		})
	}
}

func TestLimitRejectsGarbage(t *testing.T) {
	for _, data := range []string{"lots 100000\n", "15000 0\n", "15000\n"} {
		_, _, err := limit(fstest.MapFS{
			"proc/self/cgroup":         file("0::/n1\n"),
			"proc/self/mountinfo":      file(mountsV2),
			"sys/fs/cgroup/n1/cpu.max": file(data),
		})
		if err == nil {
			t.Errorf("cpu.max %q: no error", data)
		}
	}
}

// The machine's own limit reads without error (whatever it is).
func TestLimitHere(t *testing.T) {
	if _, _, err := Limit(); err != nil {
		t.Fatal(err)
	}
}
