package pve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"

	"github.com/converge-pve/converge/events"
)

// Defaults PVE applies to absent keys. LXC cores default to "no limit"
// (the container sees every host CPU), which is not the same as 1, so it is
// reported as 0; sockets do not exist for LXC (0).
const (
	DefaultQEMUCores   = 1
	DefaultQEMUSockets = 1
	DefaultMemoryMiB   = 512
)

// GuestConfig is a guest's configuration as applied (GET …/config?current=1,
// or the values of GET …/pending), normalised, plus what is pending (GET
// …/pending): values written but not yet in effect, typically until the
// next reboot.
type GuestConfig struct {
	Ref    GuestRef
	Digest string // SHA-1 of the whole config file; pass it on writes

	Name        string   // QEMU name / LXC hostname
	Description string   // events.NormaliseDescription applied
	Tags        []string // events.ParseTags applied
	Cores       int      // QEMU default 1; LXC 0 = not limited
	Sockets     int      // QEMU default 1; LXC 0 (n/a)
	MemoryMiB   int      // default 512
	OnBoot      bool
	Lock        string
	Template    bool
	// Protected is config key "protection": Proxmox refuses to destroy
	// the guest (and to remove its disks) while it is set.
	Protected bool

	// Raw is the applied config as strings (numbers canonical, booleans
	// 0/1), without "digest".
	Raw map[string]string
	// Pending maps keys to values written but not applied yet.
	Pending map[string]string
	// PendingDelete lists keys whose deletion is pending, sorted.
	PendingDelete []string
}

// HasPending reports whether any change waits to be applied.
func (g *GuestConfig) HasPending() bool {
	return len(g.Pending) > 0 || len(g.PendingDelete) > 0
}

// Effective returns the value key will have once pending changes are
// applied; ok is false when it will be absent.
func (g *GuestConfig) Effective(key string) (value string, ok bool) {
	for _, k := range g.PendingDelete {
		if k == key {
			return "", false
		}
	}
	if v, ok := g.Pending[key]; ok {
		return v, true
	}
	v, ok := g.Raw[key]
	return v, ok
}

// GuestConfig reads a guest's applied config and its pending changes. One
// call, GET …/pending, usually answers both: it lists every key with its
// applied value, its pending value or deletion, and the config's digest,
// all from one read of the config file. Only when the digest is missing
// from it (a Proxmox that does not list it) is GET …/config?current=1 read
// as well. Read it only when the digest, lock or desired state changed.
func (c *Client) GuestConfig(ctx context.Context, ref GuestRef) (*GuestConfig, error) {
	if err := ref.Validate(); err != nil {
		return nil, &Error{Class: ClassTerminal, Op: OpReadConfig, Ref: ref, Message: err.Error(), Err: err}
	}
	var cfg, pending json.RawMessage
	if err := c.do(ctx, OpReadPending, ref, http.MethodGet, ref.path()+"/pending", nil, &pending); err != nil {
		return nil, err
	}
	g, err := DecodePendingConfig(ref, pending)
	if errors.Is(err, errNoDigest) {
		// current=1: without it PVE returns pending values as if applied.
		if err := c.do(ctx, OpReadConfig, ref, http.MethodGet, ref.path()+"/config?current=1", nil, &cfg); err != nil {
			return nil, err
		}
		g, err = DecodeGuestConfig(ref, cfg, pending)
	}
	if err != nil {
		return nil, &Error{Class: ClassUnknown, Op: OpReadConfig, Ref: ref, Message: err.Error(), Err: err}
	}
	return g, nil
}

// errNoDigest: a pending list without the config's digest cannot stand for
// the config.
var errNoDigest = errors.New("pending list carries no digest")

// DecodePendingConfig decodes a guest's config from the data of GET
// …/pending alone: the applied config is every key's value (as GET
// …/config?current=1 gives it), the digest is the "digest" key's. It
// returns errNoDigest when the list has no digest. It is exported for
// tests over captured payloads.
func DecodePendingConfig(ref GuestRef, pending []byte) (*GuestConfig, error) {
	if isNull(pending) {
		return nil, errNoDigest
	}
	items, err := decodePendingItems(pending)
	if err != nil {
		return nil, fmt.Errorf("decode pending: %w", err)
	}
	m := make(map[string]any, len(items))
	for _, it := range items {
		if it.Key != "" && it.Value != nil {
			m[it.Key] = it.Value
		}
	}
	if d, ok := valueString(m["digest"]); !ok || d == "" {
		return nil, errNoDigest
	}
	g := newGuestConfig(ref, m)
	if err := g.decodeFields(m); err != nil {
		return nil, err
	}
	g.pendingFrom(items)
	return g, nil
}

// DecodeGuestConfig decodes the data of GET …/config?current=1 and of GET
// …/pending (nil when not read). Absent keys get PVE's defaults. It is
// exported for tests over captured payloads.
func DecodeGuestConfig(ref GuestRef, config, pending []byte) (*GuestConfig, error) {
	if isNull(config) {
		return nil, errors.New("config answer carried no data")
	}
	var m map[string]any
	if err := unmarshalNumber(config, &m); err != nil {
		return nil, fmt.Errorf("decode config: %w", err)
	}
	g := newGuestConfig(ref, m)
	if err := g.decodeFields(m); err != nil {
		return nil, err
	}
	if err := g.decodePending(pending); err != nil {
		return nil, err
	}
	return g, nil
}

// newGuestConfig starts a GuestConfig from a decoded config: PVE's
// defaults, the digest, the raw values.
func newGuestConfig(ref GuestRef, m map[string]any) *GuestConfig {
	g := &GuestConfig{
		Ref:       ref,
		Raw:       make(map[string]string, len(m)),
		Pending:   map[string]string{},
		MemoryMiB: DefaultMemoryMiB,
	}
	if ref.Kind == KindQEMU {
		g.Cores, g.Sockets = DefaultQEMUCores, DefaultQEMUSockets
	}
	for k, v := range m {
		s, ok := valueString(v)
		if !ok {
			continue
		}
		if k == "digest" {
			g.Digest = s
			continue
		}
		g.Raw[k] = s
	}
	return g
}

func (g *GuestConfig) decodeFields(m map[string]any) error {
	nameKey := "name"
	if g.Ref.Kind == KindLXC {
		nameKey = "hostname"
	}
	g.Name = str(m[nameKey])
	g.Description = events.NormaliseDescription(str(m["description"]))
	g.Tags = events.ParseTags(str(m["tags"]))
	g.Lock = str(m["lock"])
	var err error
	if g.OnBoot, err = ParseBool(m["onboot"]); err != nil {
		return fmt.Errorf("onboot: %w", err)
	}
	if g.Template, err = ParseBool(m["template"]); err != nil {
		return fmt.Errorf("template: %w", err)
	}
	if g.Protected, err = ParseBool(m["protection"]); err != nil {
		return fmt.Errorf("protection: %w", err)
	}
	for key, dst := range map[string]*int{"cores": &g.Cores, "sockets": &g.Sockets} {
		v, ok := m[key]
		if !ok || v == nil {
			continue
		}
		n, err := ParseInt(v)
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		*dst = int(n)
	}
	if v, ok := m["memory"]; ok && v != nil {
		if g.MemoryMiB, err = ParseMemoryMiB(v); err != nil {
			return err
		}
	}
	return nil
}

// pendingItem is one entry of GET …/pending. value is the applied value,
// pending the one waiting; delete is 1 (delete) or 2 (forced delete).
type pendingItem struct {
	Key     string `json:"key"`
	Value   any    `json:"value"`
	Pending any    `json:"pending"`
	Delete  any    `json:"delete"`
}

func (g *GuestConfig) decodePending(data []byte) error {
	if isNull(data) {
		return nil
	}
	items, err := decodePendingItems(data)
	if err != nil {
		return fmt.Errorf("decode pending: %w", err)
	}
	g.pendingFrom(items)
	return nil
}

// pendingFrom takes the pending values and deletions of a pending list.
func (g *GuestConfig) pendingFrom(items []pendingItem) {
	for _, it := range items {
		if it.Key == "" || it.Key == "digest" {
			continue
		}
		// Most items have no "delete": ParseInt would build an error for it.
		if it.Delete != nil {
			if del, err := ParseInt(it.Delete); err == nil && del > 0 {
				g.PendingDelete = append(g.PendingDelete, it.Key)
				continue
			}
		}
		if p, ok := valueString(it.Pending); ok {
			g.Pending[it.Key] = p
		}
	}
	sort.Strings(g.PendingDelete)
}

// GuestStatus is a guest's live power state (GET …/status/current).
type GuestStatus struct {
	Status    string // running | stopped
	QMPStatus string // QEMU only: running, paused, prelaunch, …
	Lock      string
	Uptime    int64 // seconds
	HAManaged bool
}

// GuestStatus reads a guest's current power state into a fresh value.
func (c *Client) GuestStatus(ctx context.Context, ref GuestRef) (*GuestStatus, error) {
	if err := ref.Validate(); err != nil {
		return nil, &Error{Class: ClassTerminal, Op: OpReadStatus, Ref: ref, Message: err.Error(), Err: err}
	}
	var raw json.RawMessage
	if err := c.do(ctx, OpReadStatus, ref, http.MethodGet, ref.path()+"/status/current", nil, &raw); err != nil {
		return nil, err
	}
	st, err := DecodeGuestStatus(raw)
	if err != nil {
		return nil, &Error{Class: ClassUnknown, Op: OpReadStatus, Ref: ref, Message: err.Error(), Err: err}
	}
	return st, nil
}

// DecodeGuestStatus decodes the data of GET …/status/current.
func DecodeGuestStatus(data []byte) (*GuestStatus, error) {
	if isNull(data) {
		return nil, errors.New("status answer carried no data")
	}
	var m map[string]any
	if err := unmarshalNumber(data, &m); err != nil {
		return nil, fmt.Errorf("decode status: %w", err)
	}
	st := &GuestStatus{Status: str(m["status"]), QMPStatus: str(m["qmpstatus"]), Lock: str(m["lock"])}
	if st.Status == "" {
		return nil, errors.New("status answer has no status")
	}
	if v, ok := m["uptime"]; ok && v != nil {
		f, err := ParseFloat(v)
		if err != nil {
			return nil, fmt.Errorf("uptime: %w", err)
		}
		st.Uptime = int64(f)
	}
	if ha, ok := m["ha"].(map[string]any); ok {
		managed, err := ParseBool(ha["managed"])
		if err != nil {
			return nil, fmt.Errorf("ha.managed: %w", err)
		}
		st.HAManaged = managed
	}
	return st, nil
}
