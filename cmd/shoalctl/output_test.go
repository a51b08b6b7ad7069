package main

import (
	"bytes"
	"testing"

	"github.com/shoalmq/shoal/client"
	"github.com/shoalmq/shoal/wire"
)

var outputs = []struct {
	name  string
	r     result
	json  string
	table string
}{
	{"assignment",
		assignmentResult{Topic: "topic-blue", Owner: "n2", OwnerAddr: "127.0.0.1:7102", Epoch: 1, Partitions: 4, Shard: 417},
		`{"topic":"topic-blue","owner":"n2","owner_addr":"127.0.0.1:7102","epoch":1,"partitions":4,"shard":417}` + "\n",
		"TOPIC       OWNER  OWNER ADDR      EPOCH  PARTITIONS  SHARD\n" +
			"topic-blue  n2     127.0.0.1:7102  1      4           417\n"},
	{"revoked",
		revokedResult{Topic: "topic-blue", Epoch: 3},
		`{"topic":"topic-blue","epoch":3}` + "\n",
		"TOPIC       REVOKED AT EPOCH\n" +
			"topic-blue  3\n"},
	{"produced",
		producedResult{Topic: "topic-blue", Epoch: 2, Offset: 41},
		`{"topic":"topic-blue","epoch":2,"offset":41}` + "\n",
		"TOPIC       EPOCH  OFFSET\n" +
			"topic-blue  2      41\n"},
	{"fetched",
		fetchedResult{Topic: "t", Epoch: 2, Records: []client.Record{
			{Offset: 0, Epoch: 1, Value: []byte("hello")}, {Offset: 1, Epoch: 1, Value: []byte("a\tb <&>")}, {Offset: 1 << 40, Epoch: 2, Value: []byte{}}}},
		`{"topic":"t","epoch":2,"records":[{"offset":0,"epoch":1,"value":"hello"},{"offset":1,"epoch":1,"value":"a\tb <&>"},{"offset":1099511627776,"epoch":2,"value":""}]}` + "\n",
		"OFFSET         EPOCH  VALUE\n" +
			"0              1      hello\n" +
			"1              1      \"a\\tb <&>\"\n" +
			"1099511627776  2      \"\"\n"},
	{"fetched nothing",
		fetchedResult{Topic: "t", Epoch: 1},
		`{"topic":"t","epoch":1,"records":[]}` + "\n",
		"OFFSET  EPOCH  VALUE\n"},
	{"members",
		membersResult{
			{ID: "n1", Generation: 3, Incarnation: 1, State: wire.MemberAlive, Rack: "r1", SwimAddr: "127.0.0.1:7301", ClientAddr: "127.0.0.1:7101", PeerAddr: "127.0.0.1:7201"},
			{ID: "n2", Generation: 1, State: wire.MemberDead, Rack: "r2", SwimAddr: "127.0.0.1:7302", ClientAddr: "127.0.0.1:7102", PeerAddr: "127.0.0.1:7202"},
		},
		`{"members":[{"id":"n1","generation":3,"incarnation":1,"state":"alive","rack":"r1","swim_addr":"127.0.0.1:7301","client_addr":"127.0.0.1:7101","peer_addr":"127.0.0.1:7201"},` +
			`{"id":"n2","generation":1,"incarnation":0,"state":"dead","rack":"r2","swim_addr":"127.0.0.1:7302","client_addr":"127.0.0.1:7102","peer_addr":"127.0.0.1:7202"}]}` + "\n",
		"ID  GENERATION  INCARNATION  STATE  RACK  SWIM ADDR       CLIENT ADDR     PEER ADDR\n" +
			"n1  3           1            alive  r1    127.0.0.1:7301  127.0.0.1:7101  127.0.0.1:7201\n" +
			"n2  1           0            dead   r2    127.0.0.1:7302  127.0.0.1:7102  127.0.0.1:7202\n"},
	{"no members",
		membersResult(nil),
		`{"members":[]}` + "\n",
		"ID  GENERATION  INCARNATION  STATE  RACK  SWIM ADDR  CLIENT ADDR  PEER ADDR\n"},
	{"shards",
		shardsResult{
			{Shard: 0, Replicas: []string{"n1", "n2", "n3"}, Leader: "n1", Term: 4, Base: 8},
			{Shard: 1, Replicas: nil, Leader: "", Term: 0},
			{Shard: 37, Replicas: []string{"n2"}, Leader: "n2", Term: 7, Base: 8, BaseShard: 3, Depth: 2, Path: 1},
		},
		`{"shards":[{"shard":0,"replicas":["n1","n2","n3"],"leader":"n1","term":4,"range":"h%8=0"},{"shard":1,"replicas":[],"leader":"","term":0,"range":"-"},` +
			`{"shard":37,"replicas":["n2"],"leader":"n2","term":7,"range":"h%8=3 q%4=1"}]}` + "\n",
		"SHARD  RANGE        LEADER  TERM  REPLICAS\n" +
			"0      h%8=0        n1      4     n1,n2,n3\n" +
			"1      -            -       0     \n" +
			"37     h%8=3 q%4=1  n2      7     n2\n"},
	{"status",
		statusResult{Node: "n1", Generation: 3, MembersAlive: 3, ShardsHosted: 1024, ShardsLed: 341, TopicsOwned: 12, Ready: true},
		`{"node":"n1","generation":3,"members_alive":3,"shards_hosted":1024,"shards_led":341,"topics_owned":12,"ready":true}` + "\n",
		"NODE  GENERATION  MEMBERS ALIVE  SHARDS HOSTED  SHARDS LED  TOPICS OWNED  READY\n" +
			"n1    3           3              1024           341         12            true\n"},
}

func TestOutputJSONKeys(t *testing.T) {
	for _, tc := range outputs {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := writeResult(&b, tc.r, true); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.json {
				t.Fatalf("JSON\n%s\nwant\n%s", b.String(), tc.json)
			}
		})
	}
}

func TestOutputTables(t *testing.T) {
	for _, tc := range outputs {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := writeResult(&b, tc.r, false); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.table {
				t.Fatalf("table\n%s\nwant\n%s", b.String(), tc.table)
			}
		})
	}
}

func TestOutputErrors(t *testing.T) {
	tests := []struct {
		code, msg string
		json      bool
		want      string
	}{
		{"NotFound", "client: lookup \"t\": shoal: not found", false, "shoalctl: lookup \"t\": shoal: not found\n"},
		{"NotFound", "lookup \"t\":\nshoal: not found", true, `{"error":{"code":"NotFound","message":"lookup \"t\": shoal: not found"}}` + "\n"},
		{"Usage", "assign: missing TOPIC", true, `{"error":{"code":"Usage","message":"assign: missing TOPIC"}}` + "\n"},
	}
	for _, tc := range tests {
		var b bytes.Buffer
		writeError(&b, tc.code, tc.msg, tc.json)
		if b.String() != tc.want {
			t.Errorf("writeError(%q, %q, %v) = %q, want %q", tc.code, tc.msg, tc.json, b.String(), tc.want)
		}
	}
}
