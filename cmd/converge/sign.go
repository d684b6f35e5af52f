package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/projector"
)

// signFlags are the signed-mode settings every command that folds the
// journal shares (planner, executor, up, replay, history, plan): they
// must judge desired events alike (docs/signing.md).
type signFlags struct {
	trustedKeys string
	require     bool
	window      time.Duration
}

func (s *signFlags) register(cmd *cobra.Command) {
	pf := cmd.PersistentFlags()
	pf.StringVar(&s.trustedKeys, "trusted-keys", "", "file or directory of trusted ed25519 public keys (PEM, <key id>.pub) for signed desired events")
	pf.BoolVar(&s.require, "require-signed", false, "reject desired events that are not signed by a trusted key")
	pf.DurationVar(&s.window, "signature-window", projector.DefaultSignatureWindow, "how far a signature's time may be from its journal time; signatures are remembered this long against replays")
}

// auth is the projector's signature check the flags ask for, with extra
// keys trusted besides (up's own API key); nil when signing is off.
func (s *signFlags) auth(extra map[string]ed25519.PublicKey) (*projector.Auth, error) {
	keys, err := loadTrustedKeys(s.trustedKeys)
	if err != nil {
		return nil, usageError{err}
	}
	for id, k := range extra {
		keys[id] = k
	}
	if len(keys) == 0 && !s.require {
		return nil, nil
	}
	if len(keys) == 0 {
		return nil, usageError{errors.New("--require-signed needs --trusted-keys (no key is trusted: every desired event would be rejected)")}
	}
	return &projector.Auth{Keys: keys, Require: s.require, Window: s.window}, nil
}

// upKeys is the API signing key of the `converge up` whose data directory
// is data, if there is one: replay and history then judge its signed
// events as its planner does.
func upKeys(data string) map[string]ed25519.PublicKey {
	raw, err := os.ReadFile(filepath.Join(data, "api-signing.key"))
	if err != nil {
		return nil
	}
	k, err := events.ParsePrivateKey(raw)
	if err != nil {
		return nil
	}
	return map[string]ed25519.PublicKey{apiKeyID: k.Public().(ed25519.PublicKey)}
}

// loadTrustedKeys reads a PEM public key file (its id is its name without
// .pub) or every *.pub of a directory.
func loadTrustedKeys(path string) (map[string]ed25519.PublicKey, error) {
	keys := map[string]ed25519.PublicKey{}
	if path == "" {
		return keys, nil
	}
	files := []string{path}
	if st, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("--trusted-keys: %w", err)
	} else if st.IsDir() {
		if files, err = filepath.Glob(filepath.Join(path, "*.pub")); err != nil {
			return nil, err
		}
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("--trusted-keys: %w", err)
		}
		k, err := events.ParsePublicKey(raw)
		if err != nil {
			return nil, fmt.Errorf("--trusted-keys %s: %w", f, err)
		}
		keys[strings.TrimSuffix(filepath.Base(f), ".pub")] = k
	}
	return keys, nil
}

// loadSigningKey reads a private key; its id defaults to the file's name
// without extension.
func loadSigningKey(path, id string) (ed25519.PrivateKey, string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("--sign-key: %w", err)
	}
	k, err := events.ParsePrivateKey(raw)
	if err != nil {
		return nil, "", fmt.Errorf("--sign-key %s: %w", path, err)
	}
	if id == "" {
		id = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	}
	return k, id, nil
}

// loadOrCreateSigningKey is up's API key: created on first start (0600).
func loadOrCreateSigningKey(path string) (ed25519.PrivateKey, error) {
	if raw, err := os.ReadFile(path); err == nil {
		return events.ParsePrivateKey(raw)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	privPEM, _, err := events.MarshalKeys(priv)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	return priv, os.WriteFile(path, privPEM, 0o600)
}

func newKeygenCmd() *cobra.Command {
	var dir, id string
	cmd := &cobra.Command{
		Use:   "keygen",
		Short: "Write an ed25519 key pair for signed desired events: <id>.key (PKCS#8 PEM, 0600) and <id>.pub (PKIX PEM)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if id == "" || strings.ContainsAny(id, " \t\r\n/") {
				return usageError{fmt.Errorf("--id %q: want a name without blanks or slashes", id)}
			}
			keyPath, pubPath := filepath.Join(dir, id+".key"), filepath.Join(dir, id+".pub")
			for _, p := range []string{keyPath, pubPath} {
				if _, err := os.Stat(p); err == nil {
					return fmt.Errorf("%s exists: not overwritten", p)
				}
			}
			_, priv, err := ed25519.GenerateKey(rand.Reader)
			if err != nil {
				return err
			}
			privPEM, pubPEM, err := events.MarshalKeys(priv)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return err
			}
			if err := os.WriteFile(keyPath, privPEM, 0o600); err != nil {
				return err
			}
			if err := os.WriteFile(pubPath, pubPEM, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "private key %s (keep it secret; converge desire --sign-key %s)\npublic key  %s (give it to the planners' --trusted-keys; key id %q)\n",
				keyPath, keyPath, pubPath, id)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", ".", "where to write the keys")
	cmd.Flags().StringVar(&id, "id", "converge", "the key id: the files' name, and how signatures name the key")
	return cmd
}
