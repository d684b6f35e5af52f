package pve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
)

// Resource pools (PVE/API2/Pool.pm).

// Op values of pool calls.
const (
	OpReadPools  Op = "read-pools"
	OpCreatePool Op = "create-pool"
	OpSetPool    Op = "set-pool"
)

// poolIDRE is pve-poolid (AccessControl::verify_poolname), nested pools
// included.
var poolIDRE = regexp.MustCompile(`^[A-Za-z0-9.\-_]+(?:/[A-Za-z0-9.\-_]+){0,2}$`)

// Pool is a resource pool.
type Pool struct {
	ID      string
	Comment string
}

func poolIDErr(op Op, pool string) error {
	if poolIDRE.MatchString(pool) {
		return nil
	}
	err := fmt.Errorf("pool id %q is not a valid PVE pool name", pool)
	return &Error{Class: ClassTerminal, Op: op, Message: err.Error(), Err: err}
}

// poolPath addresses a pool: /pools/{id} works on every PVE version, a
// nested id (PVE 8.1+) needs the poolid parameter instead.
func poolPath(pool string, body map[string]any) string {
	if strings.Contains(pool, "/") {
		body["poolid"] = pool
		return "/pools"
	}
	return "/pools/" + pool
}

// Pools lists the resource pools, in Proxmox's (sorted) order.
func (c *Client) Pools(ctx context.Context) ([]Pool, error) {
	rows, err := call[[]struct {
		PoolID  string `json:"poolid"`
		Comment string `json:"comment"`
	}](ctx, c, OpReadPools, GuestRef{}, http.MethodGet, "/pools", nil)
	if err != nil {
		return nil, err
	}
	out := make([]Pool, 0, len(rows))
	for _, r := range rows {
		out = append(out, Pool{ID: r.PoolID, Comment: r.Comment})
	}
	return out, nil
}

// CreatePool creates a resource pool; one that exists already is
// ClassAlreadyDone (its comment is left as it is).
func (c *Client) CreatePool(ctx context.Context, pool, comment string) error {
	if err := poolIDErr(OpCreatePool, pool); err != nil {
		return err
	}
	body := map[string]any{"poolid": pool}
	if comment != "" {
		body["comment"] = comment
	}
	return c.do(ctx, OpCreatePool, GuestRef{}, http.MethodPost, "/pools", body, nil)
}

// SetPool adds a guest to a pool, moving it out of any other pool
// (allow-move), or with remove takes it out of the pool. A guest already
// in (or, removing, not in) the pool is ClassAlreadyDone; a pool that does
// not exist is ClassTerminal.
func (c *Client) SetPool(ctx context.Context, pool string, vmid int, remove bool) error {
	if err := poolIDErr(OpSetPool, pool); err != nil {
		return setPoolError(err, pool, vmid, remove)
	}
	if vmid < MinVMID || vmid > MaxVMID {
		err := fmt.Errorf("vmid %d out of range %d..%d", vmid, MinVMID, MaxVMID)
		return setPoolError(&Error{Class: ClassTerminal, Op: OpSetPool, Message: err.Error(), Err: err}, pool, vmid, remove)
	}
	body := map[string]any{"vms": strconv.Itoa(vmid)}
	if remove {
		body["delete"] = 1
	} else {
		body["allow-move"] = 1
	}
	return setPoolError(c.do(ctx, OpSetPool, GuestRef{}, http.MethodPut, poolPath(pool, body), body, nil), pool, vmid, remove)
}

// poolMissingRE is Proxmox's answer for a pool that does not exist:
// "update pools failed: pool 'x' does not exist", or from check_pool_exist
// "Permission check failed (pool 'x' does not exist)", which is no
// permission problem.
var poolMissingRE = regexp.MustCompile(`(?i)\bpool '[^']*' does not exist`)

// poolError is a failed pool change worded for the operator, who reads
// it as a guest's status reason: what was asked and Proxmox's answer,
// without the client's op and class jargon (the result carries the class
// on its own). It is the *Error underneath for errors.As, Classify and
// errors.Is.
type poolError struct {
	text string
	err  *Error
}

func (e *poolError) Error() string { return e.text }
func (e *poolError) Unwrap() error { return e.err }

// setPoolError words a SetPool failure for the operator; nil stays nil.
func setPoolError(err error, pool string, vmid int, remove bool) error {
	var pe *Error
	if !errors.As(err, &pe) {
		return err
	}
	what := fmt.Sprintf("moving guest %d into pool %q", vmid, pool)
	if remove {
		what = fmt.Sprintf("taking guest %d out of pool %q", vmid, pool)
	}
	why := pe.Message
	switch {
	case poolMissingRE.MatchString(why):
		why = fmt.Sprintf("pool %q does not exist in Proxmox", pool)
	case why == "" && pe.Err != nil:
		why = pe.Err.Error()
	}
	switch {
	case pe.Class == ClassUnauthorized:
		why = "Proxmox refused converge's credentials or privileges: " + why
	case pe.Indeterminate:
		why += " (Proxmox may have applied it: no answer came back)"
	}
	return &poolError{text: what + " failed: " + why, err: pe}
}
