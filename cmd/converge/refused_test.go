package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

// Writes NATS refuses the user fail at once, naming the user and the
// subject, instead of waiting 5–10 s and ending in "context deadline
// exceeded" (issue 35, defect 8): desire and approve as the auditor,
// resync as the publisher. desire's own answer says the journal took the
// event, not that the planners will accept it.
func TestRefusedWritesFailAtOnce(t *testing.T) {
	srv := shippedServer(t)
	run := func(user string, args ...string) (string, error) {
		t.Helper()
		t.Setenv("CONVERGE_NATS_PASSWORD", "pw-"+user+"-0123456789abcdef")
		root := newRoot()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs(append(args, "--nats", srv.ClientURL(), "--nats-user", user, "--data", t.TempDir()))
		err := root.Execute()
		return out.String(), err
	}
	if out, err := run("admin", "provision"); err != nil {
		t.Fatalf("provision: %v\n%s", err, out)
	}
	for _, c := range []struct {
		user    string
		args    []string
		subject string
	}{
		{"auditor", []string{"desire", "101", "--power", "running"}, "pve.desired.pve.101"},
		{"auditor", []string{"approve", "101"}, "pve.control.pve"},
		{"publisher", []string{"resync"}, "pve.control.pve"},
	} {
		// Only the refusal names the user: a write that waited out its
		// deadline ends in "context deadline exceeded".
		_, err := run(c.user, c.args...)
		if err == nil || !strings.Contains(err.Error(), `"`+c.user+`"`) || !strings.Contains(err.Error(), c.subject) ||
			errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s as %s: %v, want a refusal naming the user and %s", c.args, c.user, err, c.subject)
		}
	}
	out, err := run("publisher", "desire", "101", "--power", "running")
	if err != nil || !strings.Contains(out, "journalled: revision") || !strings.Contains(out, "unsigned") ||
		!strings.Contains(out, "converge status 101") {
		t.Fatalf("desire as publisher: %v\n%s", err, out)
	}
}
