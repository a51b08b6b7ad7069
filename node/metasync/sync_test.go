package metasync

import (
	"sync"
	"testing"
	"time"

	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/swim"
	"github.com/shoalmq/shoal/wire"
)

func TestNewRefusesAnIncompleteConfig(t *testing.T) {
	good := Config{Self: "n1", PullTimeout: time.Second, Interval: time.Second, Leaders: router.NewLeaderTable(1), Env: &lockedEnv{}}
	if _, err := New(good); err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(*Config){
		"no self":         func(c *Config) { c.Self = "" },
		"no pull timeout": func(c *Config) { c.PullTimeout = 0 },
		"no interval":     func(c *Config) { c.Interval = -time.Second },
		"no leaders":      func(c *Config) { c.Leaders = nil },
		"no env":          func(c *Config) { c.Env = nil },
	} {
		c := good
		edit(&c)
		if _, err := New(c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// lockedEnv is an Env safe for concurrent use that sends nowhere.
type lockedEnv struct {
	mu      sync.Mutex
	members []swim.Member
	sent    int
}

func (e *lockedEnv) Send(string, []byte) error {
	e.mu.Lock()
	e.sent++
	e.mu.Unlock()
	return nil
}

func (e *lockedEnv) Members() []swim.Member {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]swim.Member(nil), e.members...)
}

func (e *lockedEnv) Join([]string)                     {}
func (e *lockedEnv) SetMetadataVersion(uint64, uint64) {}
func (e *lockedEnv) Now() time.Time                    { return time.Now() }
func (e *lockedEnv) IntN(int) int                      { return 0 }
func (e *lockedEnv) Merged()                           {}

// The event loop (Tick, Announced), request goroutines (AnswerPull,
// MergePush) and readers of the versions use one Sync at once: its lock
// is its only boundary (run with -race).
func TestSyncIsSafeForItsConcurrentCallers(t *testing.T) {
	members := []swim.Member{
		{ID: "n1", Generation: 1, Incarnation: 1, State: swim.StateAlive, SwimAddr: "n1:1"},
		{ID: "n2", Generation: 1, Incarnation: 1, State: swim.StateAlive, SwimAddr: "n2:1"},
	}
	env := &lockedEnv{members: members}
	s, err := New(Config{Self: "n1", PullTimeout: time.Millisecond, Interval: time.Millisecond, Leaders: router.NewLeaderTable(4), Env: env})
	if err != nil {
		t.Fatal(err)
	}
	list := wire.AppendMetadataPush(nil, &wire.MetadataPush{Kind: wire.MetaMembership, Version: 3,
		Data: wire.AppendMemberRecords(nil, recordsOf(members))})
	table := wire.AppendMetadataPush(nil, &wire.MetadataPush{Kind: wire.MetaShardLeaders, Version: 2,
		Data: wire.AppendLeaderTable(nil, []wire.LeaderRow{{Shard: 1, Leader: []byte("n2"), Term: 2}})})
	pull := wire.AppendMetadataPull(nil, &wire.MetadataPull{Kind: wire.MetaRing})
	var wg sync.WaitGroup
	const rounds = 200
	wg.Go(func() {
		for i := range rounds {
			s.Observe(env.Members())
			s.Announced(uint64(wire.MetaRing), "n2", uint64(i))
			s.Tick([]string{"n1", "n2"}, nil)
		}
	})
	wg.Go(func() {
		for range rounds {
			s.MergePush("n2", list)
			s.MergePush("n2", table)
		}
	})
	wg.Go(func() {
		for range rounds {
			if s.AnswerPull(1, pull) == nil {
				t.Error("no answer")
			}
			_ = s.Versions()
			_ = s.Synced([]string{"n1", "n2"}, time.Now())
		}
	})
	wg.Wait()
	if v := s.Versions(); v.Membership < 3 || v.ShardLeaders != 2 {
		t.Fatalf("versions %+v", v)
	}
	if st := s.Stats(); st.Merges != 2*rounds {
		t.Fatalf("merges %d, want %d", st.Merges, 2*rounds)
	}
}
