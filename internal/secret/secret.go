package secret

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/rs/zerolog"
	"github.com/spf13/pflag"
)

// MaxFileSize bounds a secret file: a token or password is short, and a
// path pointing at something large by mistake should not be slurped.
const MaxFileSize = 64 << 10

// Flag is one secret and the flags and variables that carry it: --Name
// (default from $Env) and --Name-file (default from $Env_FILE).
type Flag struct {
	Name  string // the flag, e.g. "pve-token-secret"
	Env   string // the variable, e.g. "PVE_TOKEN_SECRET"
	Usage string // what the secret is, e.g. "Proxmox API token secret"

	value, file string
}

// FileFlag is the name of the flag that reads the secret from a file.
func (f *Flag) FileFlag() string { return f.Name + "-file" }

// FileEnv is the variable that names the file.
func (f *Flag) FileEnv() string { return f.Env + "_FILE" }

// Register adds --Name and --Name-file to fl.
func (f *Flag) Register(fl *pflag.FlagSet) {
	// The variables are named where flags are read (cmd/converge's
	// configuration layer): not twice here.
	fl.StringVar(&f.value, f.Name, os.Getenv(f.Env), fmt.Sprintf("%s; prefer --%s: the command line is readable by every local user",
		f.Usage, f.FileFlag()))
	fl.StringVar(&f.file, f.FileFlag(), os.Getenv(f.FileEnv()), fmt.Sprintf("read the %s from this file, trailing newline trimmed",
		f.Usage))
}

// Resolve returns the secret from the file, the environment or the
// command line (warned about, see the package contract); "" when none is
// given.
func (f *Flag) Resolve(fl *pflag.FlagSet, log zerolog.Logger) (string, error) {
	if f.file != "" {
		if f.value != "" {
			return "", fmt.Errorf("both --%s (or %s) and --%s (or %s) are set: give the secret once",
				f.Name, f.Env, f.FileFlag(), f.FileEnv())
		}
		return ReadFile(f.file, "--"+f.FileFlag(), log)
	}
	if f.value != "" && fl.Changed(f.Name) {
		log.Warn().Str("flag", "--"+f.Name).Msgf("SECRET ON THE COMMAND LINE: every local user can read --%s in /proc/PID/cmdline and ps; use --%s (or %s) or the variable %s instead",
			f.Name, f.FileFlag(), f.FileEnv(), f.Env)
	}
	return f.value, nil
}

// ReadFile reads a secret from path; what names the source in messages
// (a flag or variable).
func ReadFile(path, what string, log zerolog.Logger) (string, error) {
	fh, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	defer fh.Close()
	if st, err := fh.Stat(); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o077 != 0 {
		log.Warn().Str("file", path).Str("mode", st.Mode().Perm().String()).
			Msgf("%s: the secret file is readable by group or others; chmod 600 it", what)
	}
	b, err := io.ReadAll(io.LimitReader(fh, MaxFileSize+1))
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	if len(b) > MaxFileSize {
		return "", fmt.Errorf("%s: %s is larger than %d bytes: not a secret file", what, path, MaxFileSize)
	}
	s := strings.TrimRight(string(b), "\r\n")
	if s == "" {
		return "", errors.New(what + ": " + path + " is empty")
	}
	if strings.ContainsAny(s, "\r\n") {
		return "", fmt.Errorf("%s: %s holds more than one line; a secret file holds the secret alone", what, path)
	}
	return s, nil
}
