package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/converge-pve/converge/events"
)

// approve, pause, resume and release journal --reason with the request,
// and history shows it; a reason the contract refuses exits 2 with
// nothing published.
func TestOperateReason(t *testing.T) {
	c := startCLIBus(t)
	c.desire(t, 101, "--cores", "2")
	ctx := context.Background()
	stream, err := c.b.JS.Stream(ctx, "PVE")
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"pause", "resume", "approve", "release"} {
		why := cmd + " for CHG-42: disk swap on pve2"
		out, code := c.cli(t, cmd, "101", "--reason", why, "-o", "json")
		var got struct {
			Seq    uint64
			Reason string
		}
		if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || got.Reason != why {
			t.Fatalf("%s: exit %d %v: %s", cmd, code, err, out)
		}
		m, err := stream.GetMsg(ctx, got.Seq)
		if err != nil {
			t.Fatal(err)
		}
		ctl, err := events.Decode[events.Control](m.Data)
		if err != nil || ctl.Command != cmd || ctl.Reason != why {
			t.Fatalf("%s journalled %+v %v", cmd, ctl, err)
		}
	}
	out, code := c.cli(t, "history", "101", "-o", "json")
	if code != 0 || !strings.Contains(out, `reason: \"release for CHG-42: disk swap on pve2\"`) {
		t.Fatalf("history: exit %d:\n%s", code, out)
	}

	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"two\nlines", strings.Repeat("x", 1025)} {
		if out, code := c.cli(t, "pause", "101", "--reason", bad); code != exitUsage || !strings.Contains(out, "reason") {
			t.Errorf("reason %.20q: exit %d: %s", bad, code, out)
		}
	}
	after, err := stream.Info(ctx)
	if err != nil || after.State.Msgs != info.State.Msgs {
		t.Fatalf("a refused reason was journalled: %d → %d (%v)", info.State.Msgs, after.State.Msgs, err)
	}
}
