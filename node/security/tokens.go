package security

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"io"
	"strings"
	"sync/atomic"

	"github.com/shoalmq/shoal/wire"
)

// Token is one client credential and its role.
type Token struct {
	Value string // MinTokenLen to wire.MaxTokenLen printable ASCII characters, no spaces
	Role  Role
}

// ParseTokens reads a client token file: one "TOKEN ROLE" per line, '#'
// starting a comment, blank lines ignored. Errors wrap ErrTokenFile, name
// the line, and never show a token.
func ParseTokens(r io.Reader) ([]Token, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxCredentialFile+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTokenFile, err)
	}
	if len(b) > maxCredentialFile {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrTokenFile, maxCredentialFile)
	}
	var toks []Token
	seen := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), maxCredentialFile)
	for line := 1; sc.Scan(); line++ {
		text, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(text)
		if len(f) == 0 {
			continue
		}
		if len(f) != 2 {
			return nil, fmt.Errorf("%w: line %d: want TOKEN ROLE, got %d fields", ErrTokenFile, line, len(f))
		}
		if err := validateToken(f[0]); err != nil {
			return nil, fmt.Errorf("%w: line %d: %w", ErrTokenFile, line, err)
		}
		role, err := ParseRole(f[1])
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %w", ErrTokenFile, line, err)
		}
		if prev, ok := seen[f[0]]; ok {
			return nil, fmt.Errorf("%w: line %d: the token of line %d again", ErrTokenFile, line, prev)
		}
		if len(toks) == MaxClientTokens {
			return nil, fmt.Errorf("%w: line %d: more than %d tokens", ErrTokenFile, line, MaxClientTokens)
		}
		seen[f[0]] = line
		toks = append(toks, Token{Value: f[0], Role: role})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTokenFile, err)
	}
	if len(toks) == 0 {
		return nil, fmt.Errorf("%w: no token in it", ErrTokenFile)
	}
	return toks, nil
}

// validateToken says what is wrong with a token, without showing it.
func validateToken(tok string) error {
	if len(tok) < MinTokenLen || len(tok) > wire.MaxTokenLen {
		return fmt.Errorf("a token of %d characters (want %d to %d)", len(tok), MinTokenLen, wire.MaxTokenLen)
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] <= ' ' || tok[i] > '~' {
			return fmt.Errorf("a token with a character other than printable ASCII at position %d", i+1)
		}
	}
	return nil
}

// Grant is what a good token grants a connection. A connection keeps its
// grant: a role changed by a later table applies to it at once, a token
// the later table dropped stops serving it. Its methods are safe for
// concurrent use.
type Grant struct {
	digest  [sha256.Size]byte
	role    atomic.Uint32
	revoked atomic.Bool
}

// Role is the role the grant's token has now.
func (g *Grant) Role() Role { return Role(g.role.Load()) }

// Revoked reports whether a later table dropped the grant's token.
func (g *Grant) Revoked() bool { return g.revoked.Load() }

// TokenTable is a node's client tokens, kept as digests. A table does not
// change once built; NewTokenTable builds its successor.
type TokenTable struct {
	grants []*Grant
}

// Find returns the grant of tok, or nil for a token the table does not
// hold. It compares tok's digest with every token's in constant time; the
// grant it returns may have been revoked since (Grant.Revoked).
func (tt *TokenTable) Find(tok []byte) *Grant {
	d := sha256.Sum256(tok)
	var found *Grant
	for _, g := range tt.grants {
		if subtle.ConstantTimeCompare(g.digest[:], d[:]) == 1 {
			found = g
		}
	}
	return found
}

// NewTokenTable builds the table of toks (1 to MaxClientTokens valid,
// distinct tokens, each with a role). Given the table it replaces, it
// keeps old's grants whose token remains, their role updated, and revokes
// the others, so that open connections see the change at once; old is
// left as it was when toks are refused. Errors wrap ErrCredentials and
// never show a token.
func NewTokenTable(toks []Token, old *TokenTable) (*TokenTable, error) {
	if len(toks) == 0 || len(toks) > MaxClientTokens {
		return nil, fmt.Errorf("%w: want 1 to %d client tokens, not %d", ErrCredentials, MaxClientTokens, len(toks))
	}
	tt := &TokenTable{}
	type update struct {
		g    *Grant
		role Role
	}
	var updates []update
	kept := map[*Grant]bool{}
	for i, tok := range toks {
		if err := validateToken(tok.Value); err != nil {
			return nil, fmt.Errorf("%w: client token %d: %w", ErrCredentials, i+1, err)
		}
		if tok.Role < RoleRead || tok.Role > RoleAdmin {
			return nil, fmt.Errorf("%w: client token %d: %v", ErrCredentials, i+1, tok.Role)
		}
		d := sha256.Sum256([]byte(tok.Value))
		for _, g := range tt.grants {
			if g.digest == d {
				return nil, fmt.Errorf("%w: client token %d repeats an earlier one", ErrCredentials, i+1)
			}
		}
		var g *Grant
		if old != nil {
			g = old.Find([]byte(tok.Value))
		}
		if g == nil {
			g = &Grant{digest: d}
		}
		kept[g] = true
		updates = append(updates, update{g, tok.Role})
		tt.grants = append(tt.grants, g)
	}
	for _, u := range updates {
		u.g.role.Store(uint32(u.role))
	}
	if old != nil {
		for _, g := range old.grants {
			if !kept[g] {
				g.revoked.Store(true)
			}
		}
	}
	return tt, nil
}
