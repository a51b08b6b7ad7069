package security

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/shoalmq/shoal/wire"
)

const (
	adminTok = "admin-token-0123456789"
	writeTok = "write-token-0123456789"
	readTok  = "read-token-01234567890"
)

func TestParseTokens(t *testing.T) {
	file := "# operators\n" + adminTok + " admin\n\n   " + writeTok + "\twrite   # producers\n" + readTok + " read\r\n#" + "x" + "\n"
	toks, err := ParseTokens(strings.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	want := []Token{{Value: adminTok, Role: RoleAdmin}, {Value: writeTok, Role: RoleWrite}, {Value: readTok, Role: RoleRead}}
	if fmt.Sprint(toks) != fmt.Sprint(want) {
		t.Fatalf("tokens %v, want %v", toks, want)
	}
	// The bounds of a token's length, and every printable character.
	var printable []byte
	for c := byte('!'); c <= '~'; c++ {
		if c != '#' {
			printable = append(printable, c)
		}
	}
	for _, tok := range []string{strings.Repeat("a", MinTokenLen), strings.Repeat("b", wire.MaxTokenLen), string(printable)} {
		toks, err := ParseTokens(strings.NewReader(tok + " read\n"))
		if err != nil || len(toks) != 1 || toks[0].Value != tok {
			t.Errorf("a token of %d characters: %v %v", len(tok), toks, err)
		}
	}
}

// TestParseTokensRejects: each bad file is refused with ErrTokenFile, the
// line named, and no token shown.
func TestParseTokensRejects(t *testing.T) {
	many := strings.Builder{}
	for i := range MaxClientTokens + 1 {
		fmt.Fprintf(&many, "token-number-%08d read\n", i)
	}
	const secret = "secret-token-0123456789"
	cases := []struct {
		name, file, want string
	}{
		{"token alone", "\n\n" + secret + "\n", "line 3: want TOKEN ROLE, got 1 fields"},
		{"three fields", secret + " read write\n", "line 1: want TOKEN ROLE, got 3 fields"},
		{"short token", "abc admin\n", "line 1: a token of 3 characters (want 16 to 256)"},
		{"long token", strings.Repeat("x", wire.MaxTokenLen+1) + " admin\n", "line 1: a token of 257 characters"},
		{"control character", "# c\n" + secret + "\x01 admin\n", "line 2: a token with a character other than printable ASCII at position 24"},
		{"non-ASCII", "sécret-token-0123456789 admin\n", "line 1: a token with a character other than printable ASCII at position 2"},
		{"unknown role", secret + " root\n", "line 1: the role must be admin, write or read"},
		{"token as role", secret + " " + secret + "\n", "line 1: the role must be admin, write or read"},
		{"repeated", secret + " admin\n" + adminTok + " read\n" + secret + " read\n", "line 3: the token of line 1 again"},
		{"empty", "", "no token in it"},
		{"comments only", "# none yet\n\n", "no token in it"},
		{"too many", many.String(), fmt.Sprintf("line %d: more than %d tokens", MaxClientTokens+1, MaxClientTokens)},
		{"too large", strings.Repeat("#", maxCredentialFile+1), "larger than 1048576 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			toks, err := ParseTokens(strings.NewReader(c.file))
			if !errors.Is(err, ErrTokenFile) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v %v, want ErrTokenFile with %q", toks, err, c.want)
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "token-number") {
				t.Fatalf("the error shows a token: %v", err)
			}
		})
	}
	boom := errors.New("disk on fire")
	if _, err := ParseTokens(iotest.ErrReader(boom)); !errors.Is(err, ErrTokenFile) || !errors.Is(err, boom) {
		t.Fatalf("a read error: %v", err)
	}
}

// TestTokenTable: a token finds its grant, an unknown one (a prefix, a
// longer one, the empty one) finds none.
func TestTokenTable(t *testing.T) {
	tt, err := NewTokenTable([]Token{{Value: adminTok, Role: RoleAdmin}, {Value: readTok, Role: RoleRead}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for tok, want := range map[string]Role{adminTok: RoleAdmin, readTok: RoleRead} {
		g := tt.Find([]byte(tok))
		if g == nil || g.Role() != want || g.Revoked() {
			t.Fatalf("%v token: grant %+v", want, g)
		}
	}
	for _, tok := range []string{"", adminTok[:MinTokenLen], adminTok + "x", writeTok} {
		if g := tt.Find([]byte(tok)); g != nil {
			t.Errorf("%q found a grant of %v", tok, g.Role())
		}
	}
}

// TestTokenTableReplaced: a new table keeps the grants of the tokens that
// remain (so open connections keep them), with their new role, and
// revokes the others; a table refused leaves the old one as it was.
func TestTokenTableReplaced(t *testing.T) {
	old, err := NewTokenTable([]Token{{Value: adminTok, Role: RoleAdmin}, {Value: writeTok, Role: RoleWrite}, {Value: readTok, Role: RoleRead}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	admin, writer, reader := old.Find([]byte(adminTok)), old.Find([]byte(writeTok)), old.Find([]byte(readTok))
	// Refused (its last token is short): nothing changes, although the
	// tokens before it would have changed roles.
	if _, err := NewTokenTable([]Token{{Value: writeTok, Role: RoleRead}, {Value: "short", Role: RoleRead}}, old); !errors.Is(err, ErrCredentials) {
		t.Fatalf("a table with a short token: %v", err)
	}
	if writer.Role() != RoleWrite || writer.Revoked() || admin.Revoked() || reader.Revoked() {
		t.Fatalf("a refused table changed the grants: writer %v revoked %v, admin revoked %v, reader revoked %v",
			writer.Role(), writer.Revoked(), admin.Revoked(), reader.Revoked())
	}
	const fresh = "fresh-token-0123456789"
	tt, err := NewTokenTable([]Token{{Value: adminTok, Role: RoleAdmin}, {Value: writeTok, Role: RoleRead}, {Value: fresh, Role: RoleWrite}}, old)
	if err != nil {
		t.Fatal(err)
	}
	if g := tt.Find([]byte(adminTok)); g != admin || g.Role() != RoleAdmin || g.Revoked() {
		t.Errorf("admin token: a new grant, or changed")
	}
	if g := tt.Find([]byte(writeTok)); g != writer || writer.Role() != RoleRead || writer.Revoked() {
		t.Errorf("write token made read: same grant %v, role %v, revoked %v", g == writer, writer.Role(), writer.Revoked())
	}
	if !reader.Revoked() || tt.Find([]byte(readTok)) != nil {
		t.Errorf("read token dropped: revoked %v", reader.Revoked())
	}
	if g := tt.Find([]byte(fresh)); g == nil || g.Role() != RoleWrite || g.Revoked() {
		t.Errorf("new token: %+v", g)
	}
	// A token dropped and given again later is a new grant: the
	// connections that held it stay refused.
	again, err := NewTokenTable([]Token{{Value: readTok, Role: RoleAdmin}}, tt)
	if err != nil {
		t.Fatal(err)
	}
	if g := again.Find([]byte(readTok)); g == nil || g == reader || !reader.Revoked() || g.Role() != RoleAdmin {
		t.Errorf("a token given again: %+v", g)
	}
	if !admin.Revoked() || !writer.Revoked() {
		t.Errorf("the tokens of the third table's predecessor were not revoked")
	}
}

// TestTokenTableRejects: a bad set of tokens is refused with
// ErrCredentials, and no token is shown.
func TestTokenTableRejects(t *testing.T) {
	many := make([]Token, MaxClientTokens+1)
	for i := range many {
		many[i] = Token{Value: fmt.Sprintf("token-number-%08d", i), Role: RoleRead}
	}
	for name, c := range map[string]struct {
		toks []Token
		want string
	}{
		"none":        {nil, "want 1 to 4096 client tokens, not 0"},
		"too many":    {many, "want 1 to 4096 client tokens, not 4097"},
		"short":       {[]Token{{Value: adminTok, Role: RoleAdmin}, {Value: "short", Role: RoleRead}}, "client token 2: a token of 5 characters"},
		"space":       {[]Token{{Value: "admin token 0123456789", Role: RoleAdmin}}, "client token 1: a token with a character other than printable ASCII at position 6"},
		"no role":     {[]Token{{Value: adminTok}}, "client token 1: Role(0)"},
		"role beyond": {[]Token{{Value: adminTok, Role: RoleAdmin + 1}}, "client token 1: Role(4)"},
		"repeated":    {[]Token{{Value: adminTok, Role: RoleAdmin}, {Value: readTok, Role: RoleRead}, {Value: adminTok, Role: RoleRead}}, "client token 3 repeats an earlier one"},
	} {
		tt, err := NewTokenTable(c.toks, nil)
		if tt != nil || !errors.Is(err, ErrCredentials) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrCredentials with %q", name, err, c.want)
			continue
		}
		if strings.Contains(err.Error(), adminTok) || strings.Contains(err.Error(), "0123456789") {
			t.Errorf("%s: the error shows a token: %v", name, err)
		}
	}
}
