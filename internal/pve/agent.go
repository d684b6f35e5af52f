package pve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/converge-pve/converge/events"
)

// The QEMU guest agent: qemu-server's API2/Qemu/Agent.pm. Reading it
// needs VM.GuestAgent.Audit on PVE 9 (VM.Monitor on PVE 8).

// OpReadAgent is GET …/qemu/{vmid}/agent/network-get-interfaces.
const OpReadAgent Op = "read-agent"

// AgentEnabled reads a QEMU config's "agent" property string
// ([enabled=]<bool>[,fstrim_cloned_disks=…][,type=…]): whether the guest
// agent is enabled. Booleans as PVE's JSONSchema reads them (1, on, yes,
// true, any case); anything else, or no key, is disabled. Not a managed
// value: it only tells the observer whether to ask the agent.
func AgentEnabled(prop string) bool {
	for i, part := range strings.Split(prop, ",") {
		k, v, ok := strings.Cut(part, "=")
		switch {
		case !ok && i == 0:
			v = k // the default key, enabled
		case ok && strings.TrimSpace(k) == "enabled":
		default:
			continue
		}
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "1", "on", "yes", "true":
			return true
		}
		return false
	}
	return false
}

// AgentEnabled reports whether the applied config enables the QEMU guest
// agent (containers have none).
func (g *GuestConfig) AgentEnabled() bool {
	return g.Ref.Kind == KindQEMU && AgentEnabled(g.Raw["agent"])
}

// ErrAgentUnavailable wraps the answers of a guest agent that cannot be
// asked: Proxmox refused in PVE::QemuServer::Agent's
// assert_agent_available ("No QEMU guest agent configured", "VM <vmid>
// is not running", "QEMU guest agent is not running": the agent disabled
// or not started, the VM paused), or the agent answered an error
// (check_agent_error's "Agent error: …"). The addresses are then unknown;
// it is not a failure of Proxmox.
var ErrAgentUnavailable = errors.New("guest agent unavailable")

// agentIface is one GuestNetworkInterface of qemu-ga's
// guest-network-get-interfaces.
type agentIface struct {
	Name     string    `json:"name"`
	Hardware string    `json:"hardware-address"`
	IPs      []agentIP `json:"ip-addresses"`
}

type agentIP struct {
	Type    string `json:"ip-address-type"`
	Address string `json:"ip-address"`
	Prefix  Value  `json:"prefix"`
}

// AgentAddresses asks a running QEMU guest's agent for its network
// interfaces (GET …/agent/network-get-interfaces, whose data is
// {"result": [...]}) and returns their addresses, normalised
// (events.NormaliseAddresses: sorted, loopback and IPv6 link-local left
// out). An agent that cannot be asked is an error wrapping
// ErrAgentUnavailable, with Proxmox's message.
func (c *Client) AgentAddresses(ctx context.Context, ref GuestRef) ([]events.GuestAddress, error) {
	if ref.Kind != KindQEMU {
		return nil, &Error{Class: ClassTerminal, Op: OpReadAgent, Ref: ref, Message: "only QEMU guests have a guest agent"}
	}
	if err := ref.Validate(); err != nil {
		return nil, &Error{Class: ClassTerminal, Op: OpReadAgent, Ref: ref, Message: err.Error(), Err: err}
	}
	ans, err := call[*struct {
		Result []agentIface `json:"result"`
	}](ctx, c, OpReadAgent, ref, http.MethodGet, ref.path()+"/agent/network-get-interfaces", nil)
	if err != nil {
		return nil, agentError(err)
	}
	if ans == nil {
		return nil, &Error{Class: ClassUnknown, Op: OpReadAgent, Ref: ref, Message: "agent answer carried no data"}
	}
	return interfaceAddresses(ans.Result), nil
}

// interfaceAddresses flattens decoded interfaces into normalised
// addresses.
func interfaceAddresses(ifs []agentIface) []events.GuestAddress {
	var out []events.GuestAddress
	for _, f := range ifs {
		if f.Name == "lo" {
			continue
		}
		for _, ip := range f.IPs {
			p := -1
			if n, err := ip.Prefix.Int(); err == nil && !ip.Prefix.IsNull() {
				p = int(n)
			}
			out = append(out, events.GuestAddress{Interface: f.Name, Address: ip.Address, Prefix: p, MAC: strings.ToLower(f.Hardware)})
		}
	}
	return events.NormaliseAddresses(out)
}

// agentError marks Proxmox's refusals of assert_agent_available.
func agentError(err error) error {
	var pe *Error
	if !errors.As(err, &pe) || pe.Status != http.StatusInternalServerError {
		return err
	}
	m := pe.Message
	if strings.Contains(m, "QEMU guest agent is not running") || strings.Contains(m, "No QEMU guest agent configured") ||
		strings.HasSuffix(m, "is not running") || strings.HasPrefix(m, "Agent error:") {
		return fmt.Errorf("%w: %s", ErrAgentUnavailable, m)
	}
	return err
}
