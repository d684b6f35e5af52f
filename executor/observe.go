package executor

import (
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/pve"
)

// observation normalises a read-back of a guest the way the observer does
// (internal/observer), through the same pve.GuestConfig methods: applied
// values in Config, managed keys that will change once pending changes
// apply in Pending.
func observation(meta events.Meta, cluster string, ref pve.GuestRef, st *pve.GuestStatus, cfg *pve.GuestConfig, readAt time.Time) *events.Observed {
	o := &events.Observed{
		Meta:      meta,
		VMID:      ref.VMID,
		Cluster:   cluster,
		Exists:    true,
		Node:      ref.Node,
		Kind:      events.GuestKind(ref.Kind),
		Status:    st.Status, // running or stopped, as the observer reports it
		Lock:      cfg.Lock,
		Template:  cfg.Template,
		Digest:    cfg.Digest,
		Protected: cfg.Protected,
		Config:    cfg.Managed(),
		Pending:   cfg.ManagedPending(),
		ReadAt:    readAt.UTC(),
		Source:    events.SourceExecutor,
	}
	if o.Lock == "" {
		o.Lock = st.Lock
	}
	return o
}
