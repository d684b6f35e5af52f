package app

import "github.com/converge-pve/converge/internal/observer"

// agentWatch is pxWatch with the guest agent reads of a Proxmox that has
// them (*pve.Client): the observer asks guests' agents for their
// addresses only through a Proxmox that can (observer.AgentReader).
type agentWatch struct {
	*pxWatch
	observer.AgentReader
}

// observerProxmox is what the observer reads: w, with w's Proxmox's agent
// reads when it has them.
func observerProxmox(w *pxWatch) observer.Proxmox {
	if ar, ok := w.Proxmox.(observer.AgentReader); ok {
		return agentWatch{w, ar}
	}
	return w
}
