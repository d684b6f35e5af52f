package executor

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/pve"
)

// managedKeys are the PVE config keys converge manages, as reported in
// Observed.Pending. LXC's "hostname" is reported as "name", the key
// actions use for both kinds (internal/pve maps it back).
var managedKeys = []string{"name", "description", "tags", "cores", "memory", "onboot"}

// observation normalises a read-back of a guest the way the observer does
// (internal/observer): applied values in Config, managed keys that will
// change once pending changes apply in Pending.
func observation(meta events.Meta, cluster string, ref pve.GuestRef, st *pve.GuestStatus, cfg *pve.GuestConfig, readAt time.Time) *events.Observed {
	o := &events.Observed{
		Meta:     meta,
		VMID:     ref.VMID,
		Cluster:  cluster,
		Exists:   true,
		Node:     ref.Node,
		Kind:     events.GuestKind(ref.Kind),
		Status:   st.Status, // running or stopped, as the observer reports it
		Lock:     cfg.Lock,
		Template: cfg.Template,
		Digest:   cfg.Digest,
		Config: events.GuestConfig{
			Name:        cfg.Name,
			Description: pve.NormaliseDescription(cfg.Description),
			Tags:        pve.NormaliseTags(cfg.Tags), // sorted, never nil
			Cores:       cfg.Cores,
			MemoryMiB:   cfg.MemoryMiB,
			OnBoot:      cfg.OnBoot,
		},
		Pending: pending(ref.Kind, cfg),
		ReadAt:  readAt.UTC(),
		Source:  events.SourceExecutor,
	}
	if o.Lock == "" {
		o.Lock = st.Lock
	}
	return o
}

// pending returns the managed keys whose value will change when pending
// changes apply, normalised like applied values (a pending deletion reads
// as the key's default), exactly as the observer reports them; nil when
// there are none.
func pending(kind pve.Kind, cfg *pve.GuestConfig) map[string]string {
	applied := map[string]string{
		"name":        cfg.Name,
		"description": pve.NormaliseDescription(cfg.Description),
		"tags":        pve.FormatTags(cfg.Tags),
		"cores":       strconv.Itoa(cfg.Cores),
		"memory":      strconv.Itoa(cfg.MemoryMiB),
		"onboot":      boolString(cfg.OnBoot),
	}
	var out map[string]string
	for _, k := range managedKeys {
		pk := k
		if kind == pve.KindLXC && k == "name" {
			pk = "hostname"
		}
		var v string
		if raw, ok := cfg.Pending[pk]; ok {
			v = normalisePending(k, raw)
		} else if slices.Contains(cfg.PendingDelete, pk) {
			v = defaultValue(kind, k)
		} else {
			continue
		}
		if v == applied[k] {
			continue // a pending write of the value in effect changes nothing
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
	}
	return out
}

// normalisePending renders a pending value the way the applied one is
// normalised; a value that does not parse is kept verbatim (trimmed).
func normalisePending(key, raw string) string {
	switch key {
	case "description":
		return pve.NormaliseDescription(raw)
	case "tags":
		return pve.FormatTags(pve.ParseTags(raw))
	case "cores":
		if n, err := pve.ParseInt(raw); err == nil {
			return strconv.FormatInt(n, 10)
		}
	case "memory":
		if n, err := pve.ParseMemoryMiB(raw); err == nil {
			return strconv.Itoa(n)
		}
	case "onboot":
		if b, err := pve.ParseBool(raw); err == nil {
			return boolString(b)
		}
	}
	return strings.TrimSpace(raw)
}

// defaultValue is what a key reads as once its pending deletion applies.
func defaultValue(kind pve.Kind, key string) string {
	switch key {
	case "cores":
		if kind == pve.KindQEMU {
			return strconv.Itoa(pve.DefaultQEMUCores)
		}
		return "0"
	case "memory":
		return strconv.Itoa(pve.DefaultMemoryMiB)
	case "onboot":
		return "0"
	}
	return ""
}

func boolString(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
