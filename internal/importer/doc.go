// Package importer turns what Proxmox VE has now into desired states that
// converge's planner reads as no drift: `converge import` (docs/import.md).
//
// A guest is read as the observer reads it (the inventory row and
// pve.GuestConfig's managed, normalised values, pending ones included),
// so the desired state is built from the very values the planner compares
// with. Every field the desired contract has is written where Proxmox's
// value is one a desired state can hold; a field that cannot be (a disk
// that is not a whole number of GiB, a name that is not a DNS name, the
// power of a guest HA ignores) is left out, unmanaged, with a note saying
// why. Pending values of managed keys are written as the desired values
// with restart: never, so publishing the result changes nothing.
//
// Each result is checked by the planner itself (planner.Plan over the
// guest's observation and the desired state, restart allowed): a field
// the planner would still act on is left out with the planner's reason,
// so an import never publishes a change.
package importer
