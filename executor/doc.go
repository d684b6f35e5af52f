// Package executor consumes actions per vmid, in order, drives Proxmox
// through internal/pve, and journals intent, the Proxmox task id (UPID) and
// the outcome as result events before and after waiting.
//
// Implemented by the event-pipeline work (issue 3).
package executor
