package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/converge-pve/converge/internal/pve"
)

// checkPVE checks the Proxmox settings before the client does, naming the
// flags and their variables rather than pve.Config's fields.
func checkPVE(c pve.Config) error {
	token := c.TokenID != "" || c.TokenSecret != ""
	login := c.Username != "" || c.Password != ""
	switch {
	case !token && !login:
		return fmt.Errorf("no Proxmox credentials: give --pve-token-id and --pve-token-secret (or %s / %s; --pve-token-secret-file keeps the secret off the command line)",
			envName("pve-token-id"), envName("pve-token-secret"))
	case token && c.TokenID == "":
		return fmt.Errorf("no Proxmox token id: give %s with the secret, e.g. converge@pve!converge", flagRef("pve-token-id"))
	case token && c.TokenSecret == "":
		return fmt.Errorf("no Proxmox token secret: give --pve-token-secret-file or %s with --pve-token-id", flagRef("pve-token-secret"))
	case token && (!strings.Contains(c.TokenID, "@") || !strings.Contains(c.TokenID, "!")):
		return fmt.Errorf("%s %q must look like user@realm!name, e.g. converge@pve!converge", flagRef("pve-token-id"), c.TokenID)
	case c.Insecure && (c.Fingerprint != "" || c.CAFile != ""):
		return errors.New("--pve-insecure contradicts --pve-fingerprint and --pve-ca: give one")
	}
	return nil
}
