package pve

import (
	"context"
	"encoding/json"
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
	var raw json.RawMessage
	if err := c.do(ctx, OpReadPools, GuestRef{}, http.MethodGet, "/pools", nil, &raw); err != nil {
		return nil, err
	}
	var rows []struct {
		PoolID  string `json:"poolid"`
		Comment string `json:"comment"`
	}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &rows); err != nil {
			return nil, &Error{Class: ClassUnknown, Op: OpReadPools, Message: err.Error(), Err: err}
		}
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
	var raw json.RawMessage
	return c.do(ctx, OpCreatePool, GuestRef{}, http.MethodPost, "/pools", body, &raw)
}

// SetPool adds a guest to a pool, moving it out of any other pool
// (allow-move), or with remove takes it out of the pool. A guest already
// in (or, removing, not in) the pool is ClassAlreadyDone; a pool that does
// not exist is ClassTerminal.
func (c *Client) SetPool(ctx context.Context, pool string, vmid int, remove bool) error {
	if err := poolIDErr(OpSetPool, pool); err != nil {
		return err
	}
	if vmid < MinVMID || vmid > MaxVMID {
		err := fmt.Errorf("vmid %d out of range %d..%d", vmid, MinVMID, MaxVMID)
		return &Error{Class: ClassTerminal, Op: OpSetPool, Message: err.Error(), Err: err}
	}
	body := map[string]any{"vms": strconv.Itoa(vmid)}
	if remove {
		body["delete"] = 1
	} else {
		body["allow-move"] = 1
	}
	var raw json.RawMessage
	return c.do(ctx, OpSetPool, GuestRef{}, http.MethodPut, poolPath(pool, body), body, &raw)
}
