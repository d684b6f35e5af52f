package pve

import (
	"context"
	"time"
)

// Role interfaces, so the observer and executor depend on what they use and
// tests can substitute fakes. *Client implements all of them.

// InventoryReader lists the cluster's guests in one call.
type InventoryReader interface {
	Inventory(ctx context.Context) ([]Resource, error)
}

// GuestReader reads one guest's config and power state.
type GuestReader interface {
	GuestConfig(ctx context.Context, ref GuestRef) (*GuestConfig, error)
	GuestStatus(ctx context.Context, ref GuestRef) (*GuestStatus, error)
}

// PowerController changes a guest's power state. Each call sends one
// request and returns the task to journal before waiting.
type PowerController interface {
	Start(ctx context.Context, ref GuestRef) (TaskRef, error)
	Stop(ctx context.Context, ref GuestRef) (TaskRef, error)
	Shutdown(ctx context.Context, ref GuestRef, timeout time.Duration, forceStop bool) (TaskRef, error)
	Reboot(ctx context.Context, ref GuestRef, timeout time.Duration) (TaskRef, error)
}

// ConfigWriter writes config changes, fenced by the config digest.
type ConfigWriter interface {
	UpdateConfig(ctx context.Context, ref GuestRef, ch ConfigChange) (TaskRef, error)
}

// Lifecycle creates and destroys guests.
type Lifecycle interface {
	Clone(ctx context.Context, src GuestRef, spec CloneSpec) (TaskRef, error)
	Delete(ctx context.Context, ref GuestRef, purge, force bool) (TaskRef, error)
}

// TaskWaiter waits for tasks and re-checks their effect.
type TaskWaiter interface {
	WaitTask(ctx context.Context, t TaskRef, opts WaitOptions) (TaskResult, error)
	VerifyPower(ctx context.Context, ref GuestRef, want string) error
}

var (
	_ InventoryReader = (*Client)(nil)
	_ GuestReader     = (*Client)(nil)
	_ PowerController = (*Client)(nil)
	_ ConfigWriter    = (*Client)(nil)
	_ Lifecycle       = (*Client)(nil)
	_ TaskWaiter      = (*Client)(nil)
)
