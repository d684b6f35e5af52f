package natsauth

import (
	"fmt"
	"strings"
)

// PasswordVar is the environment variable nats-server reads a role's
// password from in the shipped configuration.
func PasswordVar(r Role) string { return "CONVERGE_NATS_" + strings.ToUpper(string(r)) + "_PASSWORD" }

// UsersConfig is the authorization block of a nats-server configuration:
// one user per role, passwords from the environment ($VAR, which
// nats-server resolves), each with its role's permissions over n. The
// shipped deploy/nats/users.conf is this, for the default names.
func UsersConfig(n Names) string {
	var b strings.Builder
	b.WriteString("# Generated from internal/natsauth (go test ./internal/natsauth -update); do not edit.\n")
	b.WriteString("# One user per converge role; passwords from the environment variables named.\n")
	b.WriteString("authorization {\n  users = [\n")
	for _, r := range Roles {
		fmt.Fprintf(&b, "    {\n      user: %s\n      password: $%s\n", r, PasswordVar(r))
		p := For(r, n)
		if p.Unrestricted() {
			b.WriteString("      # everything: provisioning, resync, rebuild\n    }\n")
			continue
		}
		b.WriteString("      permissions: {\n")
		for _, dir := range []struct {
			name        string
			allow, deny []string
		}{{"publish", p.Publish, p.DenyPublish}, {"subscribe", p.Subscribe, nil}} {
			fmt.Fprintf(&b, "        %s: {\n          allow: [\n", dir.name)
			for _, s := range dir.allow {
				fmt.Fprintf(&b, "            %q\n", s)
			}
			b.WriteString("          ]\n")
			if len(dir.deny) > 0 {
				b.WriteString("          # the durable consumers other roles own\n          deny: [\n")
				for _, s := range dir.deny {
					fmt.Fprintf(&b, "            %q\n", s)
				}
				b.WriteString("          ]\n")
			}
			b.WriteString("        }\n")
		}
		b.WriteString("      }\n    }\n")
	}
	b.WriteString("  ]\n}\n")
	return b.String()
}
