package natsauth_test

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/converge-pve/converge/internal/natsauth"
)

var update = flag.Bool("update", false, "rewrite deploy/nats/users.conf from the table")

// The shipped users.conf is the table rendered: it never drifts.
func TestShippedUsersConfig(t *testing.T) {
	path := filepath.Join("..", "..", "deploy", "nats", "users.conf")
	want := natsauth.UsersConfig(natsauth.DefaultNames)
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("%s differs from the table; run go test ./internal/natsauth -update", path)
	}
}
