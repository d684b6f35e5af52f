package observer_test

import (
	"context"
	"testing"

	"github.com/converge-pve/converge/internal/bus/bustest"
	"github.com/converge-pve/converge/internal/observer"
	"github.com/converge-pve/converge/internal/pve"
	"github.com/converge-pve/converge/internal/pvesim"
)

// BenchmarkIdlePass10k measures a pass that finds nothing changed at
// 10,000 guests, against the simulator over HTTP: the observer's standing
// cost, every Interval, in CPU and garbage (simulator side included).
func BenchmarkIdlePass10k(b *testing.B) {
	const n = 10000
	tokens := map[string]string{"root@pam!bench": "secret"}
	sim, err := pvesim.New(pvesim.Options{Nodes: 3, Guests: n, Tokens: tokens})
	if err != nil {
		b.Fatal(err)
	}
	if err := sim.Start("127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sim.Close() })
	pc := pve.DefaultConfig()
	pc.URL, pc.TokenID, pc.TokenSecret = sim.URL(), "root@pam!bench", "secret"
	px, err := pve.New(pc)
	if err != nil {
		b.Fatal(err)
	}
	oc := observer.DefaultConfig()
	oc.Name, oc.ReadConcurrency = "bench", 16
	oc.VerifyOff = true
	o, err := observer.New(oc, px, bustest.New(b))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if st, err := o.Pass(ctx); err != nil || st.Published != n {
		b.Fatalf("first pass: %+v %v", st, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if st, err := o.Pass(ctx); err != nil || st.Published != 0 {
			b.Fatalf("idle pass: %+v %v", st, err)
		}
	}
}
