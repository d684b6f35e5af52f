package api

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"mime"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// Scope is what a token may do: read (GET /v1/…) or write (also POST).
type Scope string

// Scopes.
const (
	ScopeRead  Scope = "read"
	ScopeWrite Scope = "write"
)

// Token is one entry of a tokens file. Token is the secret itself, or
// SHA256 its hex digest, so that the file need not hold it in clear.
type Token struct {
	Name   string `json:"name"`
	Scope  Scope  `json:"scope"`
	Token  string `json:"token,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
}

// TokensFile is the YAML (or JSON) file of --http-tokens.
type TokensFile struct {
	Tokens []Token `json:"tokens"`
}

// Tokens are the bearer tokens a server accepts, by digest.
type Tokens struct {
	byDigest map[[sha256.Size]byte]Token
}

// minTokenLen refuses tokens short enough to guess.
const minTokenLen = 16

// ParseTokens reads a tokens file's content; what names it in errors.
func ParseTokens(what string, raw []byte) (*Tokens, error) {
	var f TokensFile
	if err := yaml.UnmarshalStrict(raw, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if len(f.Tokens) == 0 {
		return nil, fmt.Errorf("%s: no tokens (want tokens: [{name, scope, token|sha256}])", what)
	}
	t := &Tokens{byDigest: map[[sha256.Size]byte]Token{}}
	names := map[string]bool{}
	for i, e := range f.Tokens {
		var d [sha256.Size]byte
		switch {
		case e.Name == "" || strings.ContainsAny(e.Name, " \t\r\n:"):
			return nil, fmt.Errorf("%s: token %d: want a name without blanks or colons", what, i+1)
		case names[e.Name]:
			return nil, fmt.Errorf("%s: token name %q given twice", what, e.Name)
		case e.Scope != ScopeRead && e.Scope != ScopeWrite:
			return nil, fmt.Errorf("%s: token %q: scope must be read or write, got %q", what, e.Name, e.Scope)
		case (e.Token == "") == (e.SHA256 == ""):
			return nil, fmt.Errorf("%s: token %q: give exactly one of token and sha256", what, e.Name)
		case e.Token != "" && len(e.Token) < minTokenLen:
			return nil, fmt.Errorf("%s: token %q: shorter than %d characters", what, e.Name, minTokenLen)
		case e.Token != "":
			d = sha256.Sum256([]byte(e.Token))
		default:
			b, err := hex.DecodeString(e.SHA256)
			if err != nil || len(b) != sha256.Size {
				return nil, fmt.Errorf("%s: token %q: sha256 must be 64 hex digits", what, e.Name)
			}
			copy(d[:], b)
		}
		names[e.Name] = true
		e.Token = "" // held by digest only
		t.byDigest[d] = e
	}
	return t, nil
}

// LoadTokens reads a tokens file.
func LoadTokens(path string) (*Tokens, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--http-tokens: %w", err)
	}
	return ParseTokens(path, raw)
}

// LoadOrCreateTokens reads path, or writes it first (mode 0600) with one
// write token named admin: `converge up`'s default.
func LoadOrCreateTokens(path string) (*Tokens, bool, error) {
	if _, err := os.Stat(path); err == nil {
		t, err := LoadTokens(path)
		return t, false, err
	}
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return nil, false, err
	}
	f := TokensFile{Tokens: []Token{{Name: "admin", Scope: ScopeWrite, Token: hex.EncodeToString(b)}}}
	raw, err := yaml.Marshal(f)
	if err != nil {
		return nil, false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, false, err
	}
	if err := os.WriteFile(path, append([]byte("# converge HTTP API bearer tokens (docs/http.md)\n"), raw...), 0o600); err != nil {
		return nil, false, err
	}
	t, err := ParseTokens(path, raw)
	return t, true, err
}

// lookup returns the token whose secret is presented, in constant time
// over the presented value.
func (t *Tokens) lookup(presented string) (Token, bool) {
	d := sha256.Sum256([]byte(presented))
	for k, e := range t.byDigest {
		if subtle.ConstantTimeCompare(k[:], d[:]) == 1 {
			return e, true
		}
	}
	return Token{}, false
}

// Guard is who may call /v1 and from where.
type Guard struct {
	// Tokens are required on every /v1 call. Without them /v1 refuses
	// every call (the server then serves health and metrics alone),
	// unless NoAuth.
	Tokens *Tokens
	// NoAuth serves /v1 to anyone who reaches it; the process allows it
	// only on a loopback bind.
	NoAuth bool
	// Hosts are the Host header values accepted besides IP literals and
	// localhost (a DNS name pointing at converge: --http-host). A request
	// naming any other host is a DNS-rebinding page's and is refused.
	Hosts []string
}

// caller is who an authenticated request comes from.
type caller struct {
	name  string
	scope Scope
}

// check says why r may not proceed (status 0: it may), and who it is.
func (g *Guard) check(r *http.Request, write bool) (caller, int, string) {
	if !g.hostAllowed(r.Host) {
		return caller{}, http.StatusMisdirectedRequest, fmt.Sprintf("host %q is not this server's (use an IP address, localhost, or a name given with --http-host)", r.Host)
	}
	if o := r.Header.Get("Origin"); o != "" && !sameOrigin(o, r) {
		return caller{}, http.StatusForbidden, fmt.Sprintf("cross-origin request from %q refused", o)
	}
	if write && r.Method != http.MethodDelete {
		// A JSON body cannot come from a plain HTML form (CSRF); a DELETE
		// carries none, and browsers preflight it cross-origin.
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != "application/json" {
			return caller{}, http.StatusUnsupportedMediaType, "the body must be application/json"
		}
	}
	if g.NoAuth {
		return caller{name: "http", scope: ScopeWrite}, 0, ""
	}
	if g.Tokens == nil {
		return caller{}, http.StatusUnauthorized, "this server has no bearer tokens configured (--http-tokens): /v1 is closed"
	}
	auth := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return caller{}, http.StatusUnauthorized, "a bearer token is required (Authorization: Bearer …)"
	}
	e, ok := g.Tokens.lookup(strings.TrimSpace(tok))
	if !ok {
		return caller{}, http.StatusUnauthorized, "unknown bearer token"
	}
	if write && e.Scope != ScopeWrite {
		return caller{}, http.StatusForbidden, fmt.Sprintf("token %q may only read", e.Name)
	}
	return caller{name: e.Name, scope: e.Scope}, 0, ""
}

func (g *Guard) hostAllowed(host string) bool {
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	h = strings.Trim(h, "[]")
	if h == "" {
		return false
	}
	if net.ParseIP(h) != nil || strings.EqualFold(h, "localhost") {
		return true
	}
	for _, n := range g.Hosts {
		if strings.EqualFold(n, h) || strings.EqualFold(n, host) {
			return true
		}
	}
	return false
}

// sameOrigin: a browser's Origin is scheme://host[:port]; the request's
// own origin has its Host. A plain-HTTP request may also come from
// https:// with the same Host: a TLS-terminating proxy in front (the
// console's page was served over HTTPS by it; refused before, every write
// of the console failed behind one). The reverse is refused: a page on
// plain HTTP is no origin of a server that speaks TLS itself.
func sameOrigin(origin string, r *http.Request) bool {
	if r.TLS != nil {
		return strings.EqualFold(origin, "https://"+r.Host)
	}
	return strings.EqualFold(origin, "http://"+r.Host) || strings.EqualFold(origin, "https://"+r.Host)
}

// guarded wraps a /v1 handler with the guard; who is the caller's name.
func (s *Server) guarded(write bool, h func(w http.ResponseWriter, r *http.Request, who caller)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, code, why := s.Guard.check(r, write)
		if code != 0 {
			if code == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="converge"`)
			}
			s.Logger.Info().Str("remote", r.RemoteAddr).Str("path", r.URL.Path).Int("status", code).Str("reason", why).Msg("HTTP request refused")
			problem(w, code, why, nil)
			return
		}
		h(w, r, c)
	}
}
