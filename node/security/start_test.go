package security

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/shoalmq/shoal/internal/testcerts"
	"github.com/shoalmq/shoal/netio"
	"github.com/shoalmq/shoal/swim"
)

// The transport checks tokens only when the node takes them, and is TLS
// on every port and dial only with a certificate; SWIM gets the keyring,
// and the push-pull TLS with a certificate.
func TestTransportAndSwim(t *testing.T) {
	var plain Security
	var none Clients
	_ = none.Init(nil)
	var nc netio.Config
	Transport(&plain, &none, &nc)
	if nc.CheckToken != nil || nc.ClientTLS != nil || nc.PeerTLS != nil || nc.DialTLS != nil {
		t.Fatalf("no credentials: %+v", nc)
	}
	ca := testcerts.NewCA(t, "cluster")
	sec := Security{TLS: &TLS{Certificate: ca.Node(t, "n1").TLS, CA: ca.Pool}, SwimKeys: [][]byte{bytes.Repeat([]byte{1}, 32)},
		ClientTokens: []Token{{Value: strings.Repeat("a", MinTokenLen), Role: RoleRead}}}
	var c Clients
	if err := c.Init(sec.ClientTokens); err != nil {
		t.Fatal(err)
	}
	nc = netio.Config{}
	Transport(&sec, &c, &nc)
	if nc.CheckToken == nil || nc.ClientTLS == nil || nc.PeerTLS == nil || nc.DialTLS == nil {
		t.Fatalf("tokens and TLS: %+v", nc)
	}
	if _, ok := nc.CheckToken([]byte(strings.Repeat("a", MinTokenLen))); !ok {
		t.Fatal("the transport's check refused a known token")
	}
	var dc swim.DriverConfig
	Swim(&plain, &dc)
	if dc.Node.Keys != nil || dc.PushPullTLS != nil || dc.PushPullDialTLS != nil {
		t.Fatalf("no credentials: %+v", dc)
	}
	Swim(&sec, &dc)
	if len(dc.Node.Keys) != 1 || dc.PushPullTLS == nil || dc.PushPullDialTLS == nil {
		t.Fatalf("keys and TLS: %+v", dc)
	}
}

// The start log warns once when the node asks nothing of anyone (at info
// level when on purpose), and otherwise names what it asks and what is
// left open, never a token.
func TestLogStart(t *testing.T) {
	tok := strings.Repeat("s", MinTokenLen)
	for _, tc := range []struct {
		name   string
		sec    Security
		secret bool
		keys   int
		want   []string
		not    []string
	}{
		{"nothing", Security{}, false, 0, []string{"level=WARN msg=\"INSECURE"}, []string{"msg=security"}},
		{"on purpose", Security{InsecureOK: true}, false, 0, []string{"level=INFO msg=\"INSECURE"}, []string{"WARN"}},
		{"secret", Security{}, true, 1, []string{`peers="cluster secret" clients="cluster secret"`, "swim_keys=1"}, []string{"WARN"}},
		{"tokens without keys", Security{ClientTokens: []Token{{Value: tok, Role: RoleAdmin}}}, false, 0,
			[]string{`clients="token (1 known)"`, "level=WARN msg=\"SWIM gossip"}, []string{"INSECURE", tok}},
	} {
		var buf bytes.Buffer
		LogStart(slog.New(slog.NewTextHandler(&buf, nil)), &tc.sec, tc.secret, tc.keys)
		for _, w := range tc.want {
			if !strings.Contains(buf.String(), w) {
				t.Errorf("%s: no %q in:\n%s", tc.name, w, buf.String())
			}
		}
		for _, w := range tc.not {
			if strings.Contains(buf.String(), w) {
				t.Errorf("%s: %q in:\n%s", tc.name, w, buf.String())
			}
		}
	}
}
