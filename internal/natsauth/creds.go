package natsauth

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats-server/v2/server"
)

// CredentialsFile is where `converge up` keeps the passwords of its
// embedded server's users, in its data directory.
const CredentialsFile = "nats-users.json"

// Credentials are a password per role.
type Credentials map[Role]string

// Server is p as nats-server permissions (nil for admin: everything).
func (p Perms) Server() *server.Permissions {
	if p.Unrestricted() {
		return nil
	}
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: p.Publish, Deny: p.DenyPublish},
		Subscribe: &server.SubjectPermission{Allow: p.Subscribe},
	}
}

// Users are the embedded server's users: one per role, each with its
// role's permissions over the resources n.
func (c Credentials) Users(n Names) []*server.User {
	var out []*server.User
	for _, r := range Roles {
		out = append(out, &server.User{Username: string(r), Password: c[r], Permissions: For(r, n).Server()})
	}
	return out
}

// Load reads the credentials in dir; ok is false when there are none.
func Load(dir string) (c Credentials, ok bool, err error) {
	raw, err := os.ReadFile(filepath.Join(dir, CredentialsFile))
	if os.IsNotExist(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, false, fmt.Errorf("%s: %w", filepath.Join(dir, CredentialsFile), err)
	}
	for r, pw := range c {
		if len(pw) < 16 {
			return nil, false, fmt.Errorf("%s: no usable password for %s", filepath.Join(dir, CredentialsFile), r)
		}
	}
	if len(c[Admin]) == 0 {
		return nil, false, fmt.Errorf("%s: no password for %s", filepath.Join(dir, CredentialsFile), Admin)
	}
	return c, true, nil
}

// LoadOrCreate reads the credentials in dir, or creates them (random
// passwords, mode 0600 in a directory only its owner reads) on first use;
// a role added since they were written (the api role) gets one then.
func LoadOrCreate(dir string) (Credentials, bool, error) {
	c, ok, err := Load(dir)
	if err != nil {
		return nil, false, err
	}
	if !ok {
		c = Credentials{}
	}
	missing := false
	for _, r := range Roles {
		if c[r] != "" {
			continue
		}
		missing = true
		b := make([]byte, 24)
		if _, err := rand.Read(b); err != nil {
			return nil, false, err
		}
		c[r] = hex.EncodeToString(b)
	}
	if !missing {
		return c, false, nil
	}
	raw, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, false, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, false, err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, false, err
	}
	// Written aside and renamed: a crash, or a CLI reading the file
	// meanwhile, never sees it half written (it may be rewritten to add
	// a role).
	tmp := filepath.Join(dir, "."+CredentialsFile+".tmp")
	if err := os.WriteFile(tmp, raw, 0o600); err != nil {
		return nil, false, err
	}
	if err := os.Rename(tmp, filepath.Join(dir, CredentialsFile)); err != nil {
		return nil, false, err
	}
	return c, !ok, nil
}
