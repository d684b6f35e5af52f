package natsauth_test

import (
	"testing"

	"github.com/converge-pve/converge/internal/natsauth"
	"github.com/converge-pve/converge/internal/natsserver"
)

// With the notifier's routes named, their durable consumers (on the views
// stream and on the notifier's bucket's stream) are the notify user's
// alone: no other role may create, delete or pull from them, while the
// notify user may, and may write its own bucket and nothing else.
// (TestNotifyAcrossKills in e2e runs the notifier as this user.)
func TestNotifyOwnsItsConsumers(t *testing.T) {
	pw := map[natsauth.Role]string{}
	creds := natsauth.Credentials{}
	for _, r := range natsauth.Roles {
		pw[r] = "pw-" + string(r) + "-0123456789abcdef"
		creds[r] = pw[r]
	}
	srv, err := natsserver.Start(natsserver.Options{DataDir: t.TempDir(), Listen: "127.0.0.1:-1",
		Users: creds.Users(natsauth.Names{NotifyRoutes: []string{"ops"}})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	url := srv.ClientURL()
	owned := []string{
		"$JS.API.CONSUMER.DELETE.KV_converge_views.notify_pve~ops",
		"$JS.API.CONSUMER.CREATE.KV_converge_views.notify_pve~ops.$KV.converge_views.pve.>",
		"$JS.API.CONSUMER.MSG.NEXT.KV_converge_views.notify_pve~ops",
		"$JS.API.CONSUMER.DELETE.KV_converge_notify.notify_pve~ops",
		"$JS.API.CONSUMER.MSG.NEXT.KV_converge_notify.notify_pve~ops",
	}
	for _, r := range []natsauth.Role{natsauth.Executor, natsauth.Planner, natsauth.Auditor, natsauth.Publisher} {
		c := connect(t, url, r, pw[r])
		for _, s := range owned {
			c.mayNot(t, r, s)
		}
	}
	n := connect(t, url, natsauth.Notify, pw[natsauth.Notify])
	for _, s := range []string{"$KV.converge_views.pve.101", "$KV.converge_leases.executor-pve.m.x", "pve.desired.pve.101"} {
		n.mayNot(t, natsauth.Notify, s)
	}
	// Allowed: core publishes are not refused (the server has no stream
	// to answer them here; the refusal would come at once).
	for _, s := range append(owned, "$KV.converge_notify.g.ops.pve.101") {
		if err := n.nc.Publish(s, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	// A refusal is reported before the answer to a later request that
	// the server judges after it.
	n.mayNot(t, natsauth.Notify, "pve.result.pve.101")
	select {
	case e := <-n.denied:
		t.Fatalf("notify refused its own: %s", e)
	default:
	}
}
