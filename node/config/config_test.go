package config

import (
	"errors"
	"testing"
	"time"
)

func valid() Config {
	return Config{ID: "n1", DataDir: "/tmp/x", ClientAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0", SwimAddr: "127.0.0.1:0"}
}

// TestFillDefaultsByPreset: the zero fields take the defaults of the
// preset, "fast" faster than "lan", and the renewal stays within a third
// of the lease.
func TestFillDefaultsByPreset(t *testing.T) {
	lan, fast := valid(), valid()
	fast.SwimPreset = "fast"
	for _, c := range []*Config{&lan, &fast} {
		if err := c.Fill(); err != nil {
			t.Fatalf("%q: %v", c.SwimPreset, err)
		}
	}
	if lan.Shards != DefaultShards || lan.Replicas != DefaultReplicas || lan.BootstrapExpect != DefaultBootstrapExpect {
		t.Fatalf("lan layout %d shards %d replicas %d expect", lan.Shards, lan.Replicas, lan.BootstrapExpect)
	}
	if lan.LeaseDuration != 3*time.Second || fast.LeaseDuration != 800*time.Millisecond {
		t.Fatalf("lease %v (lan) %v (fast)", lan.LeaseDuration, fast.LeaseDuration)
	}
	for _, c := range []Config{lan, fast} {
		if c.LeaseRenewInterval*3 > c.LeaseDuration || c.LeaseConfirmFresh() != 2*c.LeaseRenewInterval {
			t.Fatalf("%q: renew %v lease %v", c.SwimPreset, c.LeaseRenewInterval, c.LeaseDuration)
		}
		if c.StoreLogSyncGap != DefaultStoreLogSyncGap || c.HandoffTimeout != DefaultHandoffTimeout || c.Logger == nil {
			t.Fatalf("%q: defaults not set: %+v", c.SwimPreset, c)
		}
	}
	if fast.RaftTickInterval >= lan.RaftTickInterval || fast.SwimConfig().ProbeInterval >= lan.SwimConfig().ProbeInterval {
		t.Fatalf("fast not faster: tick %v/%v probe %v/%v", fast.RaftTickInterval, lan.RaftTickInterval, fast.SwimConfig().ProbeInterval, lan.SwimConfig().ProbeInterval)
	}
}

// TestFillRefuses: each bad field is refused with ErrConfig.
func TestFillRefuses(t *testing.T) {
	for name, mut := range map[string]func(*Config){
		"no id":          func(c *Config) { c.ID = "" },
		"no data dir":    func(c *Config) { c.DataDir = "" },
		"no swim addr":   func(c *Config) { c.SwimAddr = "" },
		"preset":         func(c *Config) { c.SwimPreset = "wan" },
		"shards":         func(c *Config) { c.Shards = MaxShards + 1 },
		"replicas":       func(c *Config) { c.Replicas = -1 },
		"expect":         func(c *Config) { c.BootstrapExpect = -1 },
		"renew vs lease": func(c *Config) { c.LeaseDuration, c.LeaseRenewInterval = time.Second, time.Second },
		"drift":          func(c *Config) { c.MaxClockDrift = 0.5 },
		"window":         func(c *Config) { c.OwnershipWindow = -1 },
		"negative":       func(c *Config) { c.RequestTimeout = -time.Second },
		"request bytes":  func(c *Config) { c.MaxRequestBytes = 1 },
	} {
		c := valid()
		mut(&c)
		if err := c.Fill(); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: err %v, want ErrConfig", name, err)
		}
	}
}
