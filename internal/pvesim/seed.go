package pvesim

import (
	"fmt"
	"maps"
	"sort"
	"strconv"
	"strings"
	"time"
)

// GuestSpec describes a guest to add directly to the simulator's state, as
// if it had existed before converge started.
type GuestSpec struct {
	VMID        int
	Kind        Kind   // default QEMU
	Node        string // default the first node
	Name        string // VM name / CT hostname; empty leaves it unset
	Cores       int    // default 1
	MemoryMiB   int    // default 512
	Running     bool
	Template    bool
	OnBoot      bool
	Tags        []string
	Description string
	// Config holds further raw config keys, in PVE's file format.
	Config map[string]string
}

// GuestInfo is a snapshot of a guest's state.
type GuestInfo struct {
	VMID          int               `json:"vmid"`
	Kind          Kind              `json:"kind"`
	Node          string            `json:"node"`
	Status        string            `json:"status"`
	Paused        bool              `json:"paused,omitzero"`
	Lock          string            `json:"lock,omitempty"`
	Template      bool              `json:"template,omitzero"`
	Pool          string            `json:"pool,omitempty"`
	Digest        string            `json:"digest"`
	Config        map[string]string `json:"config"`
	Pending       map[string]string `json:"pending,omitempty"`
	PendingDelete []string          `json:"pending_delete,omitempty"`
}

// AddGuest creates a guest without a task, with the config Proxmox would
// have given it (disk, NIC with a generated MAC, smbios uuid, ...).
func (s *Sim) AddGuest(spec GuestSpec) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addGuest(spec)
}

func (s *Sim) addGuest(spec GuestSpec) error {
	if spec.Kind == "" {
		spec.Kind = QEMU
	}
	if spec.Kind != QEMU && spec.Kind != LXC {
		return fmt.Errorf("pvesim: unknown guest kind %q", spec.Kind)
	}
	if spec.VMID < 100 || spec.VMID > 999999999 {
		return fmt.Errorf("pvesim: vmid %d out of range 100..999999999", spec.VMID)
	}
	if s.guests[spec.VMID] != nil {
		return fmt.Errorf("pvesim: guest %d already exists", spec.VMID)
	}
	if spec.Node == "" {
		spec.Node = s.nodes[0].name
	}
	if s.nodeByName(spec.Node) == nil {
		return fmt.Errorf("pvesim: no node %q", spec.Node)
	}
	if spec.Cores <= 0 {
		spec.Cores = 1
	}
	if spec.MemoryMiB <= 0 {
		spec.MemoryMiB = 512
	}
	id := spec.VMID
	conf := map[string]string{
		"cores":  strconv.Itoa(spec.Cores),
		"memory": strconv.Itoa(spec.MemoryMiB),
	}
	prefix := "vm"
	if spec.Template {
		prefix = "base"
		conf["template"] = "1"
	}
	if spec.Kind == QEMU {
		maps.Copy(conf, map[string]string{
			"sockets": "1", "ostype": "l26", "scsihw": "virtio-scsi-single", "boot": "order=scsi0;net0",
			"cpu":     "x86-64-v2-AES",
			"scsi0":   fmt.Sprintf("local-lvm:%s-%d-disk-0,iothread=1,size=32G", prefix, id),
			"net0":    fmt.Sprintf("virtio=%s,bridge=vmbr0,firewall=1", s.mac()),
			"smbios1": "uuid=" + s.uuid(), "vmgenid": s.uuid(),
			"meta": fmt.Sprintf("creation-qemu=9.0.2,ctime=%d", time.Now().Unix()),
		})
		if spec.Name != "" {
			conf["name"] = spec.Name
		}
	} else {
		maps.Copy(conf, map[string]string{
			"swap": "512", "ostype": "debian", "arch": "amd64", "unprivileged": "1",
			"rootfs": fmt.Sprintf("local-lvm:%s-%d-disk-0,size=8G", prefix, id),
			"net0":   fmt.Sprintf("name=eth0,bridge=vmbr0,hwaddr=%s,ip=dhcp,type=veth", s.mac()),
		})
		if spec.Name != "" {
			conf["hostname"] = spec.Name
		}
	}
	if spec.OnBoot {
		conf["onboot"] = "1"
	}
	if len(spec.Tags) > 0 {
		tags, bad := canonicalTags(strings.Join(spec.Tags, ";"))
		if bad != "" {
			return fmt.Errorf("pvesim: invalid tag %q", bad)
		}
		conf["tags"] = tags
	}
	if spec.Description != "" {
		conf["description"] = spec.Description
	}
	maps.Copy(conf, spec.Config)
	g := s.newGuest(id, spec.Kind, spec.Node, conf)
	if spec.Running && !spec.Template {
		g.status, g.startedAt = "running", time.Now()
		s.pidSeq++
		g.pid = s.pidSeq
	}
	return nil
}

// seedDemo creates Options.Guests demo guests and, if asked, two templates.
func (s *Sim) seedDemo() {
	s.growDemo(0, s.opts.Guests)
	if s.opts.DemoTemplates {
		_ = s.addGuest(GuestSpec{VMID: 9000, Kind: QEMU, Name: "debian-12-cloud", Template: true, Cores: 2, MemoryMiB: 2048, Tags: []string{"template"}})
		_ = s.addGuest(GuestSpec{VMID: 9001, Kind: LXC, Name: "debian-12-ct", Template: true, Tags: []string{"template"}})
	}
}

// GrowDemo adds the demo guests vmid 100+from .. 100+to-1 that Options.Guests
// = to would have created (an estate grown while running: the bench's
// latency run at a larger scale). Existing vmids are skipped.
func (s *Sim) GrowDemo(from, to int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.growDemo(from, to)
}

func (s *Sim) growDemo(from, to int) {
	for i := from; i < to; i++ {
		id := 100 + i
		spec := GuestSpec{VMID: id, Node: s.nodes[i%len(s.nodes)].name, Cores: 1 + i%2,
			MemoryMiB: 512 << (i % 3), Running: i%2 == 0, Tags: []string{"demo"}}
		if i%3 == 2 {
			spec.Kind, spec.Name = LXC, fmt.Sprintf("ct-%d", id)
		} else {
			spec.Kind, spec.Name = QEMU, fmt.Sprintf("vm-%d", id)
		}
		_ = s.addGuest(spec)
	}
}

func (g *guest) info() GuestInfo {
	gi := GuestInfo{VMID: g.vmid, Kind: g.kind, Node: g.node, Status: g.status, Paused: g.paused,
		Lock: g.lock(), Template: g.template(), Pool: g.pool, Digest: g.digest, Config: maps.Clone(g.conf)}
	if len(g.pending) > 0 {
		gi.Pending = maps.Clone(g.pending)
	}
	gi.PendingDelete = sortedKeys(g.pendingDel)
	if len(gi.PendingDelete) == 0 {
		gi.PendingDelete = nil
	}
	return gi
}

// Guest returns a snapshot of one guest.
func (s *Sim) Guest(vmid int) (GuestInfo, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.guests[vmid]
	if g == nil {
		return GuestInfo{}, false
	}
	return g.info(), true
}

// Guests returns snapshots of all guests, by vmid.
func (s *Sim) Guests() []GuestInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]GuestInfo, 0, len(s.guests))
	for _, g := range s.guests {
		out = append(out, g.info())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].VMID < out[j].VMID })
	return out
}
