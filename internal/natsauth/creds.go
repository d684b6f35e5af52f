package natsauth

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

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
		Publish:   &server.SubjectPermission{Allow: p.Publish},
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
	for _, r := range Roles {
		if len(c[r]) < 16 {
			return nil, false, fmt.Errorf("%s: no usable password for %s", filepath.Join(dir, CredentialsFile), r)
		}
	}
	return c, true, nil
}

// LoadOrCreate reads the credentials in dir, or creates them (random
// passwords, mode 0600 in a directory only its owner reads) on first use.
func LoadOrCreate(dir string) (Credentials, bool, error) {
	if c, ok, err := Load(dir); ok || err != nil {
		return c, false, err
	}
	c := Credentials{}
	for _, r := range Roles {
		b := make([]byte, 24)
		if _, err := rand.Read(b); err != nil {
			return nil, false, err
		}
		c[r] = hex.EncodeToString(b)
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
	if err := os.WriteFile(filepath.Join(dir, CredentialsFile), raw, 0o600); err != nil {
		return nil, false, err
	}
	return c, true, nil
}
