package pve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

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
	items, err := call[[]pendingItem](ctx, c, OpReadPending, ref, http.MethodGet, ref.path()+"/pending", nil)
	if err != nil {
		return nil, err
	}
	g, err := pendingConfig(ref, items)
	if errors.Is(err, errNoDigest) {
		// current=1: without it PVE returns pending values as if applied.
		cfg, cerr := call[map[string]Value](ctx, c, OpReadConfig, ref, http.MethodGet, ref.path()+"/config?current=1", nil)
		if cerr != nil {
			return nil, cerr
		}
		g, err = guestConfig(ref, cfg, items)
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
	items, err := decodeData[[]pendingItem](pending)
	if err != nil {
		return nil, fmt.Errorf("decode pending: %w", err)
	}
	return pendingConfig(ref, items)
}

// pendingConfig is a guest's config read from its decoded pending list
// (DecodePendingConfig).
func pendingConfig(ref GuestRef, items []pendingItem) (*GuestConfig, error) {
	m := make(map[string]Value, len(items))
	for _, it := range items {
		if it.Key != "" && !it.Value.IsNull() {
			m[it.Key] = it.Value
		}
	}
	if m["digest"].Text() == "" {
		return nil, errNoDigest
	}
	g, err := guestConfig(ref, m, nil)
	if err != nil {
		return nil, err
	}
	g.pendingFrom(items)
	return g, nil
}

// DecodeGuestConfig decodes the data of GET …/config?current=1 and of GET
// …/pending (nil when not read). Absent keys get PVE's defaults. It is
// exported for tests over captured payloads.
func DecodeGuestConfig(ref GuestRef, config, pending []byte) (*GuestConfig, error) {
	m, err := decodeData[map[string]Value](config)
	if err != nil {
		return nil, fmt.Errorf("decode config: %w", err)
	}
	items, err := decodeData[[]pendingItem](pending)
	if err != nil {
		return nil, fmt.Errorf("decode pending: %w", err)
	}
	return guestConfig(ref, m, items)
}

// guestConfig reads a decoded config (nil: the answer's data was null) and
// pending list (nil: not read).
func guestConfig(ref GuestRef, m map[string]Value, pending []pendingItem) (*GuestConfig, error) {
	if m == nil {
		return nil, errors.New("config answer carried no data")
	}
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
		if v.IsNull() {
			continue
		}
		if k == "digest" {
			g.Digest = v.Text()
			continue
		}
		g.Raw[k] = v.Text()
	}
	if err := g.decodeFields(m); err != nil {
		return nil, err
	}
	g.pendingFrom(pending)
	return g, nil
}

func (g *GuestConfig) decodeFields(m map[string]Value) error {
	nameKey := "name"
	if g.Ref.Kind == KindLXC {
		nameKey = "hostname"
	}
	g.Name = m[nameKey].Text()
	g.Description = events.NormaliseDescription(m["description"].Text())
	g.Tags = events.ParseTags(m["tags"].Text())
	g.Lock = m["lock"].Text()
	var err error
	if g.OnBoot, err = m["onboot"].Bool(); err != nil {
		return fmt.Errorf("onboot: %w", err)
	}
	if g.Template, err = m["template"].Bool(); err != nil {
		return fmt.Errorf("template: %w", err)
	}
	if g.Protected, err = m["protection"].Bool(); err != nil {
		return fmt.Errorf("protection: %w", err)
	}
	if err := intKey(m, "cores", &g.Cores); err != nil {
		return err
	}
	if err := intKey(m, "sockets", &g.Sockets); err != nil {
		return err
	}
	if v := m["memory"]; !v.IsNull() {
		if g.MemoryMiB, err = memoryMiB(v); err != nil {
			return err
		}
	}
	return nil
}

// intKey sets *dst to key's integer, if the config has the key.
func intKey(m map[string]Value, key string, dst *int) error {
	v := m[key]
	if v.IsNull() {
		return nil
	}
	n, err := v.Int()
	if err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	*dst = int(n)
	return nil
}

// pendingItem is one entry of GET …/pending. value is the applied value,
// pending the one waiting; delete is 1 (delete) or 2 (forced delete).
type pendingItem struct {
	Key     string `json:"key"`
	Value   Value  `json:"value"`
	Pending Value  `json:"pending"`
	Delete  Value  `json:"delete"`
}

// pendingFrom takes the pending values and deletions of a pending list.
func (g *GuestConfig) pendingFrom(items []pendingItem) {
	for _, it := range items {
		if it.Key == "" || it.Key == "digest" {
			continue
		}
		// Most items have no "delete": Int would build an error for it.
		if !it.Delete.IsNull() {
			if del, err := it.Delete.Int(); err == nil && del > 0 {
				g.PendingDelete = append(g.PendingDelete, it.Key)
				continue
			}
		}
		if !it.Pending.IsNull() {
			g.Pending[it.Key] = it.Pending.Text()
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
	row, err := call[*statusRow](ctx, c, OpReadStatus, ref, http.MethodGet, ref.path()+"/status/current", nil)
	if err != nil {
		return nil, err
	}
	st, err := row.status()
	if err != nil {
		return nil, &Error{Class: ClassUnknown, Op: OpReadStatus, Ref: ref, Message: err.Error(), Err: err}
	}
	return st, nil
}

// DecodeGuestStatus decodes the data of GET …/status/current.
func DecodeGuestStatus(data []byte) (*GuestStatus, error) {
	row, err := decodeData[*statusRow](data)
	if err != nil {
		return nil, fmt.Errorf("decode status: %w", err)
	}
	return row.status()
}

// statusRow is the typed shape of GET …/status/current.
type statusRow struct {
	Status    Value    `json:"status"`
	QMPStatus Value    `json:"qmpstatus"`
	Lock      Value    `json:"lock"`
	Uptime    Value    `json:"uptime"`
	HA        haStatus `json:"ha"`
}

// haStatus is the "ha" member of a guest's status; anything but an object
// there says nothing of HA.
type haStatus struct {
	Managed Value `json:"managed"`
}

func (h *haStatus) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	if dec.PeekKind() != '{' {
		return dec.SkipValue()
	}
	type plain haStatus // without this method
	return json.UnmarshalDecode(dec, (*plain)(h), readOpts)
}

// status reads a status answer's data (nil: null).
func (row *statusRow) status() (*GuestStatus, error) {
	if row == nil {
		return nil, errors.New("status answer carried no data")
	}
	st := &GuestStatus{Status: row.Status.Text(), QMPStatus: row.QMPStatus.Text(), Lock: row.Lock.Text()}
	if st.Status == "" {
		return nil, errors.New("status answer has no status")
	}
	if !row.Uptime.IsNull() {
		f, err := row.Uptime.Float()
		if err != nil {
			return nil, fmt.Errorf("uptime: %w", err)
		}
		st.Uptime = int64(f)
	}
	managed, err := row.HA.Managed.Bool()
	if err != nil {
		return nil, fmt.Errorf("ha.managed: %w", err)
	}
	st.HAManaged = managed
	return st, nil
}
