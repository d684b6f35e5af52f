package secret

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/spf13/pflag"
)

const s3 = "0d2f-very-secret-token"

func write(t *testing.T, body string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil { // umask may have narrowed it
		t.Fatal(err)
	}
	return p
}

func resolve(t *testing.T, env map[string]string, args ...string) (string, string, error) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	f := &Flag{Name: "pve-token-secret", Env: "PVE_TOKEN_SECRET", Usage: "API token secret"}
	fl := pflag.NewFlagSet("t", pflag.ContinueOnError)
	f.Register(fl)
	if err := fl.Parse(args); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	v, err := f.Resolve(fl, zerolog.New(&log))
	return v, log.String(), err
}

func TestSources(t *testing.T) {
	ok := write(t, s3+"\n", 0o600)
	loose := write(t, s3+"\r\n", 0o644)
	cases := []struct {
		name    string
		env     map[string]string
		args    []string
		want    string
		warn    string // substring of the log, "" for no warning
		wantErr string
	}{
		{name: "file", args: []string{"--pve-token-secret-file", ok}, want: s3},
		{name: "file from env", env: map[string]string{"PVE_TOKEN_SECRET_FILE": ok}, want: s3},
		{name: "env", env: map[string]string{"PVE_TOKEN_SECRET": s3}, want: s3},
		{name: "command line warns", args: []string{"--pve-token-secret", s3}, want: s3, warn: "/proc/PID/cmdline"},
		{name: "loose file warns", args: []string{"--pve-token-secret-file", loose}, want: s3, warn: "chmod 600"},
		{name: "both", env: map[string]string{"PVE_TOKEN_SECRET": s3}, args: []string{"--pve-token-secret-file", ok}, wantErr: "give the secret once"},
		{name: "empty file", args: []string{"--pve-token-secret-file", write(t, "\n", 0o600)}, wantErr: "is empty"},
		{name: "two lines", args: []string{"--pve-token-secret-file", write(t, s3+"\nmore\n", 0o600)}, wantErr: "more than one line"},
		{name: "missing file", args: []string{"--pve-token-secret-file", "/nonexistent/secret"}, wantErr: "no such file"},
		{name: "none", want: ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("PVE_TOKEN_SECRET", "")
			t.Setenv("PVE_TOKEN_SECRET_FILE", "")
			got, log, err := resolve(t, c.env, c.args...)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want %q", err, c.wantErr)
				}
				if strings.Contains(err.Error(), s3) || strings.Contains(err.Error(), "more\n") {
					t.Fatalf("the error shows the secret: %v", err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %q, %v; want %q", got, err, c.want)
			}
			if (c.warn == "") != (log == "") || !strings.Contains(log, c.warn) {
				t.Fatalf("log %q, want a warning containing %q", log, c.warn)
			}
			if strings.Contains(log, s3) {
				t.Fatalf("the log shows the secret: %s", log)
			}
		})
	}
}

func TestLargeFileRefused(t *testing.T) {
	p := write(t, strings.Repeat("x", MaxFileSize+1), 0o600)
	if _, err := ReadFile(p, "--x", zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("err = %v", err)
	}
}
