package planner_test

import (
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/planner"
	"github.com/converge-pve/converge/projector"
)

// Signed mode in scenarios (docs/signing.md): test keys, the signing
// settings of the engine, and the folds that must agree with the live
// engine's (rebuild, replay).

// testKey is the private key named id: derived from the name, so that
// scenarios are deterministic.
func testKey(id string) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte("converge scenario key " + id))
	return ed25519.NewKeyFromSeed(seed[:])
}

// signing sets a signing option for the next engine: trusted=KEY,KEY…
// (the test keys trusted), require-signed[=false], signature-window=D,
// signing=off (no signature check at all).
func (h *harness) signing(k, v string) error {
	if k == "signing" {
		if v != "off" {
			return fmt.Errorf("signing=%s: want off", v)
		}
		h.cfg.Auth = nil
		return nil
	}
	// A new Auth, never the running engine's changed: the flags change
	// only with a restart.
	a := &projector.Auth{Keys: map[string]ed25519.PublicKey{}}
	if h.cfg.Auth != nil {
		*a = *h.cfg.Auth
	}
	var err error
	switch k {
	case "trusted":
		a.Keys = map[string]ed25519.PublicKey{}
		for id := range strings.SplitSeq(v, ",") {
			a.Keys[id] = testKey(id).Public().(ed25519.PublicKey)
		}
	case "require-signed":
		a.Require = v != "false"
	case "signature-window":
		a.Window, err = time.ParseDuration(v)
	}
	h.cfg.Auth = a
	return err
}

// signed folds a desired event signed by the test key named args[0] at
// the harness's time.
func (h *harness) signed(args []string) (string, error) {
	if len(args) < 3 {
		return "", fmt.Errorf("want KEY VMID JSON")
	}
	vmid, err := strconv.Atoi(args[1])
	if err != nil {
		return "", err
	}
	m, err := events.DesiredBodyMessage(vmid, []byte(strings.Join(args[2:], " ")), events.PublishOptions{Publisher: "test"})
	if err != nil {
		return "", err
	}
	if err := events.SignMessage(&m, testKey(args[0]), args[0], h.now); err != nil {
		return "", err
	}
	h.fold(events.KindDesired, vmid, m.Header, m.Data)
	return h.ready(), nil
}

// rebuild is `converge rebuild` with no planner running: the checkpoint
// is dropped, and the next planner folds the journal from the start.
func (h *harness) rebuild([]string) (string, error) {
	h.snapshot = nil
	return h.restart(nil)
}

// replay is `converge replay` with the engine's flags: a fresh projector
// folds the whole journal, and every guest is planned now.
func (h *harness) replay([]string) (string, error) {
	cfg := h.e.Config()
	p := projector.New(cfg.Cluster)
	p.Partitions, p.Auth = cfg.Partitions, cfg.Auth
	for _, ev := range h.journal {
		if ch := p.Apply(ev); ch.Err != nil {
			return "", fmt.Errorf("replay: #%d: %w", ev.Seq, ch.Err)
		}
	}
	var b strings.Builder
	for _, id := range slices.Sorted(maps.Keys(p.Views)) {
		d := planner.Plan(p.Views[id], p.State, cfg.Policy, h.now)
		fmt.Fprintf(&b, "%d %s: %s\n", id, d.Status.Kind, d.Status.Reason)
	}
	return b.String(), nil
}

// states prints the live engine's decision of every guest the journal
// names, as replay prints them.
func (h *harness) states([]string) (string, error) {
	var b strings.Builder
	for _, id := range slices.Sorted(maps.Keys(h.guests)) {
		d, ok := h.e.Decision(id)
		if !ok {
			fmt.Fprintf(&b, "%d not planned\n", id)
			continue
		}
		fmt.Fprintf(&b, "%d %s: %s\n", id, d.Status.Kind, d.Status.Reason)
	}
	return b.String(), nil
}
